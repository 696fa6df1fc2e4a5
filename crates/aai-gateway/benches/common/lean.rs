//! One call at a time from the leanest client there is, with the processes placed on
//! CPUs on purpose.
//!
//! The async [`super::Client`] is a reader task on one runtime thread that parses each
//! answer into a `Value` and wakes the caller on another: on this machine that costs a
//! call ~90 µs for a 1.4 KB answer even when the server answers at once, more than the
//! guide costs the gateway. [`Lean`] is one thread on blocking pipes: the request is
//! encoded before the clock starts and, while it runs, the answer is only read and its
//! id found.
//!
//! Placement decides the rest. On a virtual machine whose idle CPUs halt, a process woken
//! on another CPU than its waker's pays tens of µs to wake, so one round trip between two
//! processes costs ~6 µs on one CPU and ~75 µs across two, whatever the server does; and
//! the scheduler's own choice keeps whichever of the two it fell into first. Each figure
//! is therefore taken three ways ([`Placement`]), beside a floor measured the same way (a
//! server that answers at once, a relay that parses nothing).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

/// Where the client, the measured process and the processes it starts run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Wherever the scheduler puts them.
    Scheduler,
    /// All on CPU 0.
    OneCpu,
    /// The measured process on CPU 1; the client and the servers behind it on CPU 0.
    Apart,
}

impl Placement {
    /// The placements this machine has CPUs for.
    pub(crate) fn all() -> Vec<Placement> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut all = vec![Placement::Scheduler, Placement::OneCpu];
        if cpus >= 2 && cfg!(target_os = "linux") {
            all.push(Placement::Apart);
        } else {
            eprintln!("one CPU (or not Linux): the `apart` placement is not measured");
        }
        all
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Placement::Scheduler => "the scheduler's placement",
            Placement::OneCpu => "all on one CPU",
            Placement::Apart => "measured process on its own CPU",
        }
    }

    /// The arguments that place a server started by the measured process (this bench's
    /// binary, `--cpu`): on CPU 0 when the measured process is apart.
    pub(crate) fn server_args(self) -> Vec<String> {
        match self {
            Placement::Apart => vec!["--cpu".into(), "0".into()],
            _ => Vec::new(),
        }
    }

    fn measured_cpu(self) -> Option<usize> {
        match self {
            Placement::Scheduler => None,
            Placement::OneCpu => Some(0),
            Placement::Apart => Some(1),
        }
    }

    fn client_cpu(self) -> Option<usize> {
        match self {
            Placement::Scheduler => None,
            Placement::OneCpu | Placement::Apart => Some(0),
        }
    }
}

/// Runs `work` on a thread of its own, so that the placement it sets stays with it.
pub(crate) fn on_own_thread<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(work).join().expect("bench thread"))
}

/// Limits the calling thread (and the processes it starts from now on) to `cpu`.
#[cfg(target_os = "linux")]
pub(crate) fn pin(cpu: usize) {
    use nix::sched::{CpuSet, sched_setaffinity};
    let mut set = CpuSet::new();
    set.set(cpu).expect("a CPU number");
    sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .unwrap_or_else(|e| panic!("cannot run on CPU {cpu}: {e}"));
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn pin(_cpu: usize) {}

/// This bench binary's arguments, once a leading `--cpu <n>` has placed it on CPU `n`
/// (how a server started by a gateway or a relay is placed).
pub(crate) fn placed_args() -> Vec<String> {
    let mut args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--cpu") {
        pin(args[2].parse().expect("--cpu <n>"));
        args.drain(1..3);
    }
    args
}

/// A JSON-RPC client on one thread over a child's blocking pipes.
pub(crate) struct Lean {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    line: String,
}

/// The median and p99 of a round of calls, in µs, and the measured process's CPU per
/// call (user + system, children excluded; 10 ms ticks).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Round {
    pub(crate) median: f64,
    pub(crate) p99: f64,
    pub(crate) cpu: f64,
}

impl Lean {
    /// Starts `program` placed as `placement` says, on the calling thread's placement
    /// (call it from [`on_own_thread`]).
    pub(crate) fn spawn(program: &str, args: &[&str], placement: Placement) -> Lean {
        if let Some(cpu) = placement.measured_cpu() {
            pin(cpu);
        }
        let mut child = Command::new(program)
            .args(args)
            .env("AAI_SYSTEM_ROOT", "/nonexistent")
            .env("AAI_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        if let Some(cpu) = placement.client_cpu() {
            pin(cpu);
        }
        Lean {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next: 1,
            line: String::new(),
        }
    }

    pub(crate) fn initialize(&mut self) {
        self.call(
            "initialize",
            &json!({"protocolVersion":"2025-11-25","capabilities":{},
                    "clientInfo":{"name":"bench","version":"1"}}),
        );
        self.stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
    }

    /// Sends one request and reads until its answer: the time it took (µs) and the answer.
    pub(crate) fn call(&mut self, method: &str, params: &Value) -> (f64, &str) {
        let id = self.next;
        self.next += 1;
        let mut request =
            serde_json::to_vec(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
                .unwrap();
        request.push(b'\n');
        let ours = format!("\"id\":{id},");
        let started = Instant::now();
        self.stdin.write_all(&request).unwrap();
        loop {
            self.line.clear();
            let n = self.stdout.read_line(&mut self.line).unwrap();
            assert!(n > 0, "the server ended before answering {method}");
            if self.line.contains(&ours) {
                break;
            }
        }
        (started.elapsed().as_secs_f64() * 1e6, &self.line)
    }

    /// 200 calls to warm up, then `calls` timed; `check` sees each answer after its
    /// clock stopped.
    pub(crate) fn round(
        &mut self,
        calls: usize,
        make: impl Fn(usize) -> (&'static str, Value),
        check: impl Fn(&str),
    ) -> Round {
        for i in 0..200 {
            let (method, params) = make(i);
            check(self.call(method, &params).1);
        }
        let before = self.cpu_us();
        let mut us = Vec::with_capacity(calls);
        for i in 0..calls {
            let (method, params) = make(i);
            let (took, answer) = self.call(method, &params);
            us.push(took);
            check(answer);
        }
        let cpu = (self.cpu_us() - before) / calls as f64;
        let (median, p99) = super::stats(us);
        Round { median, p99, cpu }
    }

    fn cpu_us(&self) -> f64 {
        super::proc_cpu_us(self.child.id())
    }
}

impl Drop for Lean {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server that answers every request at once with the answer in `file` (a JSON-RPC
/// answer line), its id replaced by the request's: the floor under a call whose answer
/// is that long.
pub(crate) fn canned(file: &Path) {
    let answer = std::fs::read_to_string(file).unwrap();
    let tail = &answer[answer.find(",\"result\"").expect("an answer with a result")..];
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut reply = Vec::with_capacity(answer.len() + 32);
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Some(at) = line.find("\"id\":") else {
            continue;
        };
        let id = &line[at + 5..];
        let id = &id[..id.find([',', '}']).unwrap_or(id.len())];
        reply.clear();
        reply.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        reply.extend_from_slice(id.as_bytes());
        reply.extend_from_slice(tail.trim_end().as_bytes());
        reply.push(b'\n');
        out.write_all(&reply).unwrap();
        out.flush().unwrap();
    }
}
