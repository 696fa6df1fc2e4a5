//! The stdio transport: MCP on stdin/stdout for one client, until the client goes away
//! or the gateway is asked to stop.
//!
//! Between the pipes and rmcp sits a thin framing layer that makes the JSON-RPC rules
//! hold where rmcp 3.9 bends them (docs/mcp.md lists what remains):
//!
//! * a line that is not JSON (or not UTF-8), or longer than 16 MiB, is answered with
//!   -32700 Parse error (rmcp drops it, and a client waiting for that id waits forever);
//!   the id is recovered from the text when it can be, else it is `null`, as JSON-RPC says;
//! * a line that is JSON but not a request, response or notification (an array, no
//!   `jsonrpc: "2.0"`, no `method`) is answered with -32600 Invalid Request, with its id
//!   when it has a usable one;
//! * `initialize`, `tools/call` and `resources/read` whose `params` have the wrong shape
//!   get -32602 Invalid params (rmcp answers -32601 Method not found);
//! * a request whose `params._meta` is not an object gets -32602 Invalid params (rmcp
//!   answers -32600 with no id at all); such a notification is dropped (rmcp answers it);
//! * an id is recovered only when it is JSON: `"id": 01` is a parse error with the null id;
//! * a request whose id is still in flight gets -32600 (rmcp would answer only one).
//!
//! Everything else passes through untouched, in both directions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::ErrorCode;
use serde_json::{Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::Server;
use crate::gateway::Handle;
use crate::lines::read_line_capped;

/// Longest accepted line (rmcp's own limit).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// How long the answers already made may take to reach the client once the session ends.
const ANSWER_GRACE: Duration = Duration::from_millis(500);

/// How long, after [`ANSWER_GRACE`], the line being written may take to go out whole.
const LINE_GRACE: Duration = Duration::from_secs(5);

/// How long after the client's input ends the session may take to end (rmcp gives the
/// calls in flight 5 s).
const CLOSE_GRACE: Duration = Duration::from_secs(6);

/// Serves MCP on stdin/stdout until the client leaves or the gateway stops (the
/// gateway's background work is the lifecycle's: `gateway::Lifecycle::serve`).
pub async fn serve(gateway: Handle) -> anyhow::Result<()> {
    let (input, output, _restore) = pipes::stdio();
    serve_on(gateway, input, output).await
}

/// [`serve`] over any pair of pipes.
pub async fn serve_on(
    gateway: Handle,
    input: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> anyhow::Result<()> {
    let (rmcp_side, our_side) = tokio::io::duplex(1 << 16);
    let (from_rmcp, to_rmcp) = tokio::io::split(our_side);
    let output = Arc::new(tokio::sync::Mutex::new(output));
    let in_flight: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let (quit, drain) = (CancellationToken::new(), CancellationToken::new());
    let mut inbound = tokio::spawn(inbound(
        input,
        to_rmcp,
        output.clone(),
        in_flight.clone(),
        quit.clone(),
    ));
    let mut outbound = tokio::spawn(outbound(from_rmcp, output, in_flight, drain.clone()));
    // A stop asked for before the client's `initialize` ends the wait for it, and a
    // client that leaves before it ends the session as one that leaves after it.
    let service = tokio::select! {
        service = Server::new(gateway.clone(), "stdio").serve(rmcp_side) => match service {
            Ok(service) => Some(service),
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
                tracing::info!("the client left before it initialized the session");
                None
            }
            Err(e) => return Err(e.into()),
        },
        () = gateway.stopping() => {
            tracing::info!("asked to stop before the client initialized the session");
            None
        }
    };
    let mut input_ended = false;
    if let Some(service) = service {
        let cancel = service.cancellation_token();
        // Once the client's input ends, rmcp answers what is in flight (for at most 5 s)
        // and ends the session; it cannot when its answers wait on a client that no
        // longer reads, so that wait is bounded too.
        let closed = async {
            let _ = (&mut inbound).await;
            input_ended = true;
            tokio::time::sleep(CLOSE_GRACE).await;
        };
        tokio::select! {
            reason = service.waiting() => tracing::info!("client session ended: {reason:?}"),
            () = gateway.stopping() => cancel.cancel(),
            () = closed => {
                tracing::info!("the session did not end {CLOSE_GRACE:?} after the client's input did");
                cancel.cancel();
            }
        }
    }
    quit.cancel();
    // Let the last answers reach the client: those written within the grace, and then
    // the line being written, whole, if the client reads it in time.
    let written = async {
        if !input_ended {
            let _ = (&mut inbound).await;
        }
        let _ = (&mut outbound).await;
    };
    let mut written = std::pin::pin!(written);
    if tokio::time::timeout(ANSWER_GRACE, &mut written)
        .await
        .is_err()
    {
        drain.cancel();
        if tokio::time::timeout(LINE_GRACE, &mut written)
            .await
            .is_err()
        {
            // Not a warning: warnings go to stderr too, which may be the pipe the
            // client has stopped reading (`2>&1`), and writing there would block.
            tracing::info!(
                "the client did not read the last answer within {LINE_GRACE:?}: it is cut"
            );
        }
    }
    inbound.abort();
    outbound.abort();
    Ok(())
}

/// Client → rmcp: checks each line, answers the broken ones itself. Once `quit` is
/// cancelled no new line is read; an answer being written is finished.
async fn inbound(
    input: impl tokio::io::AsyncRead + Unpin,
    mut to_rmcp: impl AsyncWrite + Unpin,
    output: Arc<tokio::sync::Mutex<impl AsyncWrite + Unpin>>,
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
    quit: CancellationToken,
) {
    let mut reader = BufReader::new(input);
    let mut line = Vec::with_capacity(4096);
    let mut quit = std::pin::pin!(quit.cancelled());
    loop {
        line.clear();
        let read = tokio::select! {
            biased;
            () = &mut quit => break,
            read = read_line_capped(&mut reader, &mut line, MAX_LINE + 1) => read,
        };
        let consumed = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let verdict = if consumed > MAX_LINE {
            // Only the line's head was kept: its top-level id may be in it.
            let head = String::from_utf8_lossy(&line);
            Err(error(
                recover_id(&head).as_ref(),
                ErrorCode::PARSE_ERROR,
                "Parse error: the message is longer than 16 MiB",
            ))
        } else {
            check(&line, &in_flight)
        };
        match verdict {
            Ok(()) => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if to_rmcp.write_all(&line).await.is_err() {
                    break;
                }
            }
            Err(Some(answer)) => {
                let mut out = output.lock().await;
                let _ = out.write_all(answer.as_bytes()).await;
                let _ = out.flush().await;
            }
            Err(None) => {}
        }
    }
    // End of input: rmcp sees it too and ends the session.
    let _ = to_rmcp.shutdown().await;
}

/// rmcp → client: forwards each line whole and notes which ids were answered. Once
/// `drain` is cancelled no new line is started; the one being written is finished.
async fn outbound(
    from_rmcp: impl tokio::io::AsyncRead + Unpin,
    output: Arc<tokio::sync::Mutex<impl AsyncWrite + Unpin>>,
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
    drain: CancellationToken,
) {
    let mut reader = BufReader::new(from_rmcp);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        // rmcp closes its end when the session ends (when it cannot, the session's end
        // aborts this task).
        match read_line_capped(&mut reader, &mut line, usize::MAX).await {
            Ok(0) | Err(_) => break,
            Ok(_) if drain.is_cancelled() => break,
            Ok(_) => {}
        }
        if let Some(id) = response_id(&line) {
            in_flight.lock().expect("in-flight lock").remove(&id);
        }
        let mut out = output.lock().await;
        if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
            break;
        }
    }
}

/// `Ok` to pass the line on; `Err(Some(answer))` to answer it here; `Err(None)` to drop
/// it silently (a broken notification: JSON-RPC never answers those).
fn check(line: &[u8], in_flight: &Mutex<HashMap<String, usize>>) -> Result<(), Option<String>> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t.trim(),
        Err(_) => {
            let id = recover_id(&String::from_utf8_lossy(line));
            return Err(error(
                id.as_ref(),
                ErrorCode::PARSE_ERROR,
                "Parse error: the message is not UTF-8",
            ));
        }
    };
    if text.is_empty() {
        return Err(None);
    }
    if let Some(problem) = crate::budget::problem(text.as_bytes()) {
        return Err(error(
            recover_id(text).as_ref(),
            ErrorCode::INVALID_REQUEST,
            &format!("Invalid Request: {problem}"),
        ));
    }
    let message: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Err(error(
                recover_id(text).as_ref(),
                ErrorCode::PARSE_ERROR,
                &format!("Parse error: {e}"),
            ));
        }
    };
    let Value::Object(map) = &message else {
        return Err(error(
            None,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: a message is one JSON object (batches are not part of MCP)",
        ));
    };
    let id = map.get("id").filter(|id| id.is_string() || id.is_number());
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(error(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: `jsonrpc` must be \"2.0\"",
        ));
    }
    let Some(method) = map.get("method") else {
        // A response to one of our requests (elicitation, roots): rmcp's business.
        return if map.contains_key("result") || map.contains_key("error") {
            Ok(())
        } else {
            Err(error(
                id,
                ErrorCode::INVALID_REQUEST,
                "Invalid Request: no `method`",
            ))
        };
    };
    let Some(method) = method.as_str() else {
        return Err(error(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: `method` must be a string",
        ));
    };
    match map.get("id") {
        // A notification: never answered. One whose `_meta` rmcp cannot read is dropped
        // here: rmcp would answer it, with no id.
        None if meta_problem(map.get("params")).is_some() => return Err(None),
        None => return Ok(()),
        Some(Value::String(_)) => {}
        // rmcp reads integer ids only (as i64): another number would come back changed.
        Some(Value::Number(n)) if n.is_i64() => {}
        Some(Value::Number(_)) => {
            // Echoed as the client wrote it (serde would turn 2^64 into a float).
            let raw = raw_id(text).unwrap_or("null");
            let message =
                json!("Invalid Request: a numeric `id` must be an integer of at most 64 bits");
            let code = ErrorCode::INVALID_REQUEST.0;
            return Err(Some(format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{raw},\"error\":{{\"code\":{code},\"message\":{message}}}}}\n"
            )));
        }
        Some(_) => {
            return Err(error(
                None,
                ErrorCode::INVALID_REQUEST,
                "Invalid Request: `id` must be a string or a number",
            ));
        }
    }
    if let Some(problem) = params_problem(method, map.get("params")) {
        return Err(error(
            id,
            ErrorCode::INVALID_PARAMS,
            &format!("Invalid params: {problem}"),
        ));
    }
    admit(id, line.len(), in_flight)
}

/// Counts a request as in flight, or refuses it when too many (or too much data) are, or
/// when one with the same id still is.
fn admit(
    id: Option<&Value>,
    len: usize,
    in_flight: &Mutex<HashMap<String, usize>>,
) -> Result<(), Option<String>> {
    let key = id.map(Value::to_string).unwrap_or_default();
    let mut in_flight = in_flight.lock().expect("in-flight lock");
    // Refused rather than left unread: the client's answers to our own requests
    // (elicitation) must still get through.
    let held: usize = in_flight.values().sum();
    if in_flight.len() >= crate::budget::MAX_IN_FLIGHT
        || held + len > crate::budget::MAX_IN_FLIGHT_BYTES
    {
        return Err(error(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: too many requests (or too much data) are already in progress; send more when some are answered",
        ));
    }
    if in_flight.contains_key(&key) {
        return Err(error(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: a request with this id is still in progress",
        ));
    }
    in_flight.insert(key, len);
    Ok(())
}

/// What is wrong with the `params` of the methods whose wrong params rmcp misreports.
fn params_problem(method: &str, params: Option<&Value>) -> Option<&'static str> {
    let obj = match params {
        Some(Value::Object(o)) => Some(o),
        None | Some(Value::Null) => None,
        Some(_) => return Some("`params` must be an object"),
    };
    if let Some(problem) = meta_problem(params) {
        return Some(problem);
    }
    let text = |k: &str| obj.and_then(|o| o.get(k)).is_some_and(Value::is_string);
    let object_or_absent = |k: &str| {
        obj.and_then(|o| o.get(k))
            .is_none_or(|v| v.is_object() || v.is_null())
    };
    match method {
        "tools/call" if !text("name") => Some("`name` must be a string"),
        "tools/call" if !object_or_absent("arguments") => Some("`arguments` must be an object"),
        "resources/read" if !text("uri") => Some("`uri` must be a string"),
        "initialize" if !text("protocolVersion") => Some("`protocolVersion` must be a string"),
        "initialize"
            if !obj
                .and_then(|o| o.get("clientInfo"))
                .is_some_and(|c| c.get("name").is_some_and(Value::is_string)) =>
        {
            Some("`clientInfo.name` must be a string")
        }
        "initialize"
            if !obj
                .and_then(|o| o.get("capabilities"))
                .is_some_and(Value::is_object) =>
        {
            Some("`capabilities` must be an object")
        }
        _ => None,
    }
}

/// What is wrong with `params._meta` (rmcp reads every message's, and answers one that is
/// not an object with -32600 and no id at all).
fn meta_problem(params: Option<&Value>) -> Option<&'static str> {
    params
        .and_then(|p| p.get("_meta"))
        .filter(|m| !(m.is_object() || m.is_null()))
        .map(|_| "`_meta` must be an object")
}

/// The id of an outgoing response (`{"jsonrpc":"2.0","id":…,"result"|"error":…}`), as
/// the JSON text it was sent with; `None` for requests and notifications.
fn response_id(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        id: Option<Value>,
        method: Option<serde::de::IgnoredAny>,
    }
    let head: Head = serde_json::from_slice(line).ok()?;
    if head.method.is_some() {
        return None;
    }
    head.id.map(|id| id.to_string())
}

/// The top-level `"id": <integer or string>` of broken (or cut) JSON text: keys inside
/// nested objects (`params.arguments.id`) are not the message's id.
fn recover_id(text: &str) -> Option<Value> {
    id_value(raw_id(text)?)
}

/// The text of the top-level `id`'s value (a string with its quotes, or a number).
fn raw_id(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    // Whether the string that starts next, at depth 1, is a key.
    let mut expecting_key = false;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => {
                depth += 1;
                expecting_key = depth == 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => expecting_key = true,
            b'"' => {
                let end = string_end(bytes, i)?;
                if depth == 1 && expecting_key && &bytes[i..=end] == b"\"id\"" {
                    let rest = text[end + 1..].trim_start().strip_prefix(':')?.trim_start();
                    let len = if rest.starts_with('"') {
                        string_end(rest.as_bytes(), 0)? + 1
                    } else {
                        rest.find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
                            .unwrap_or(rest.len())
                    };
                    return Some(&rest[..len]);
                }
                expecting_key = false;
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Where the string starting at `start` (a `"`) ends (its closing `"`).
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// A JSON string or an i64 written as `raw`, as JSON writes them: `01` and `+1` are no
/// JSON numbers, so they recover no id (the answer's id is `null`).
fn id_value(raw: &str) -> Option<Value> {
    match serde_json::from_str::<Value>(raw).ok()? {
        id @ Value::String(_) => Some(id),
        Value::Number(n) => n.as_i64().map(Value::from),
        _ => None,
    }
}

/// A JSON-RPC error answer line.
fn error(id: Option<&Value>, code: ErrorCode, message: &str) -> Option<String> {
    let id = id.cloned().unwrap_or(Value::Null);
    Some(format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.0, "message": message}})
    ))
}

/// stdin and stdout for [`serve`].
///
/// tokio's own stdin and stdout hand every read and every write to a blocking thread:
/// three thread switches per call, a quarter of a warm call's cost. A pipe or a socket
/// (what MCP clients start servers with) is read and written by the runtime's event
/// loop instead, non-blocking. Anything else (a terminal, a file, `/dev/null`) and every
/// other platform keep tokio's blocking stdio.
mod pipes {
    use tokio::io::{AsyncRead, AsyncWrite};

    pub(super) type Input = Box<dyn AsyncRead + Unpin + Send>;
    pub(super) type Output = Box<dyn AsyncWrite + Unpin + Send>;

    #[cfg(unix)]
    pub(super) use unix::stdio;

    #[cfg(not(unix))]
    pub(super) fn stdio() -> (Input, Output, ()) {
        (
            Box::new(tokio::io::stdin()),
            Box::new(tokio::io::stdout()),
            (),
        )
    }

    #[cfg(unix)]
    mod unix {
        use std::fs::File;
        use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        use nix::sys::stat::{SFlag, fstat};
        use tokio::net::UnixStream;
        use tokio::net::unix::pipe;

        use super::{Input, Output};

        /// The descriptors' modes as they were before the session, put back when it
        /// ends: the mode belongs to the open pipe, which the process that started the
        /// gateway may share and use after it.
        #[derive(Debug, Default)]
        pub(in super::super) struct Restore(Vec<(OwnedFd, OFlag)>);

        impl Drop for Restore {
            fn drop(&mut self) {
                // Last saved first: stdin and stdout may be one pipe, whose second saved
                // mode is the first one's change.
                for (fd, flags) in self.0.iter().rev() {
                    let _ = fcntl(fd, FcntlArg::F_SETFL(*flags));
                }
            }
        }

        pub(in super::super) fn stdio() -> (Input, Output, Restore) {
            let mut restore = Restore::default();
            let stdin = std::io::stdin();
            let stdout = std::io::stdout();
            let input = on_event_loop(stdin.as_fd(), &mut restore, |stream| -> Option<Input> {
                match stream {
                    Stream::Pipe(file) => Some(Box::new(pipe::Receiver::from_file(file).ok()?)),
                    Stream::Socket(socket) => Some(Box::new(socket)),
                }
            });
            // stderr on the same pipe (`2>&1`) would get EAGAIN and lose lines: blocking.
            let shared = same_file(stdout.as_fd(), std::io::stderr().as_fd());
            let output = if shared {
                None
            } else {
                on_event_loop(stdout.as_fd(), &mut restore, |stream| -> Option<Output> {
                    match stream {
                        Stream::Pipe(file) => Some(Box::new(pipe::Sender::from_file(file).ok()?)),
                        Stream::Socket(socket) => Some(Box::new(socket)),
                    }
                })
            };
            (
                input.unwrap_or_else(|| Box::new(tokio::io::stdin())),
                output.unwrap_or_else(|| Box::new(tokio::io::stdout())),
                restore,
            )
        }

        /// Whether `a` and `b` are the same file (the same pipe, socket, …).
        fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
            match (fstat(a), fstat(b)) {
                (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
                _ => false,
            }
        }

        enum Stream {
            Pipe(File),
            Socket(UnixStream),
        }

        /// `fd`, when it is a pipe or a socket, made non-blocking and handed to `wrap`
        /// for the event loop. Its mode is put back at once when that fails, and by
        /// `restore` when the session ends.
        fn on_event_loop<T>(
            fd: BorrowedFd<'_>,
            restore: &mut Restore,
            wrap: impl FnOnce(Stream) -> Option<T>,
        ) -> Option<T> {
            let kind = SFlag::from_bits_truncate(fstat(fd).ok()?.st_mode) & SFlag::S_IFMT;
            if kind != SFlag::S_IFIFO && kind != SFlag::S_IFSOCK {
                return None;
            }
            let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL).ok()?);
            let kept = fd.try_clone_to_owned().ok()?;
            let owned = fd.try_clone_to_owned().ok()?;
            let wrapped = if kind == SFlag::S_IFIFO {
                // `from_file` makes it non-blocking.
                wrap(Stream::Pipe(File::from(owned)))
            } else {
                let socket = std::os::unix::net::UnixStream::from(owned);
                socket
                    .set_nonblocking(true)
                    .ok()
                    .and_then(|()| UnixStream::from_std(socket).ok())
                    .and_then(|socket| wrap(Stream::Socket(socket)))
            };
            if wrapped.is_some() {
                restore.0.push((kept, flags));
            } else {
                let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
            }
            wrapped
        }
    }
}

#[cfg(test)]
#[path = "stdio_tests.rs"]
mod tests;
