"""D-Bus services for the tests, on the bus named by DBUS_SESSION_BUS_ADDRESS.

    python3 dbus_services.py json  NAME   # the JSON convention: com.aai.Executor.Execute(s) -> s
    python3 dbus_services.py typed NAME   # methods of many signatures, and properties

Prints "ready" once it owns NAME.
"""
import asyncio
import json
import os
import sys

from dbus_fast import DBusError, Variant
from dbus_fast.aio import MessageBus
from dbus_fast.service import PropertyAccess, ServiceInterface, dbus_property, method


class Executor(ServiceInterface):
    def __init__(self):
        super().__init__("com.aai.Executor")

    @method()
    async def Execute(self, request: "s") -> "s":
        req = json.loads(request)
        tool, p, rid = req["tool"], req.get("params", {}), req["request_id"]
        if tool == "greet":
            return json.dumps({"version": "1.0", "request_id": rid, "status": "success",
                               "result": {"greeting": f"hello {p['name']}", "version": req["version"]}})
        if tool == "fail":
            return json.dumps({"version": "1.0", "request_id": rid, "status": "error",
                               "error": {"code": -32005, "message": "name is not allowed"}})
        if tool == "slow":
            await asyncio.sleep(p["seconds"])
            return json.dumps({"version": "1.0", "request_id": rid, "status": "success", "result": "slow"})
        if tool == "die":
            os._exit(1)
        return "this is not an envelope"


class Typed(ServiceInterface):
    def __init__(self):
        super().__init__("com.example.Typed")
        self._volume = 0.5

    @method()
    def Basics(self, byte: "y", flag: "b", small: "n", usmall: "q", num: "i", unum: "u",
               big: "x", ubig: "t", real: "d", text: "s", path: "o", sig: "g") -> "ybnqiuxtdsog":
        return [byte, flag, small, usmall, num, unum, big, ubig, real, text, path, sig]

    @method()
    def Containers(self, names: "as", hints: "a{sv}", pairs: "a{ss}", record: "(isb)",
                   grid: "aai") -> "asa{sv}a{ss}(isb)aai":
        return [names, hints, pairs, record, grid]

    @method()
    def Describe(self, value: "v") -> "s":
        return f"{value.signature}:{json.dumps(unwrap(value.value))}"

    @method()
    def Ping(self) -> "s":
        return "pong"

    @method()
    def JsonText(self) -> "s":
        return '{"answer": 42}'

    @method()
    def Boom(self):
        raise DBusError("com.example.Error.Boom", "it broke on purpose")

    @method()
    async def Sleep(self, seconds: "d") -> "s":
        await asyncio.sleep(seconds)
        return "slept"

    @dbus_property()
    def Volume(self) -> "d":
        return self._volume

    @Volume.setter
    def Volume(self, value: "d"):
        self._volume = value

    @dbus_property(access=PropertyAccess.READ)
    def Status(self) -> "s":
        return "Playing"


def unwrap(v):
    if isinstance(v, Variant):
        return unwrap(v.value)
    if isinstance(v, dict):
        return {k: unwrap(x) for k, x in v.items()}
    if isinstance(v, list):
        return [unwrap(x) for x in v]
    return v


async def main(kind, name):
    bus = await MessageBus().connect()
    if kind == "json":
        path = "/" + name.replace(".", "/")
        bus.export(path, Executor())
    else:
        bus.export("/com/example/Typed", Typed())
    await bus.request_name(name)
    print("ready", flush=True)
    await bus.wait_for_disconnect()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
