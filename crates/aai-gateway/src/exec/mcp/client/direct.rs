//! `tools/call` to a stdio server without rmcp's service loop: the call's request is
//! written to the server's stdin by the calling task, and its answer is taken from the
//! server's stdout by the framing ([`super::framing::Capped`]) and handed to that task.
//!
//! Through rmcp a call passes the service loop twice and a spawned send task once, and its
//! answer is decoded by trying each result type in turn, then encoded to JSON again:
//! three task wake-ups and two codecs a call where this path has one wake-up and one
//! decode. Everything else stays rmcp's: the handshake, notifications (a call's progress
//! arrives through rmcp's handler, by the token this path sets), the server's own requests
//! and other methods. At 2026-07-28 and later each request carries the session's metadata
//! (its revision, the client's name and capabilities), as rmcp's do.
//!
//! What the two writers share: whole lines. rmcp writes through [`SharedStdin`], which
//! gathers each line and writes it under the same lock as this path's lines.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use rmcp::model::{
    CallToolResult, ClientConfig, ClientJsonRpcMessage, ClientRequest, ErrorData, GetMeta,
    InputRequiredResult, NumberOrString, ProgressToken, ProtocolVersion, RequestId, ResultType,
};
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::process::ChildStdin;
use tokio::sync::{OwnedMutexGuard, oneshot};

/// What the ids (and progress tokens) of this path's requests start with; rmcp's are
/// numbers.
const PREFIX: &str = "aai-";

/// The direct path of one stdio connection.
pub(super) struct Wire {
    stdin: Arc<tokio::sync::Mutex<ChildStdin>>,
    pub(super) waiting: Arc<Waiting>,
    next: AtomicU64,
    /// What each request's `_meta` says of the session (2026-07-28 and later).
    session: Option<Session>,
}

/// A session of 2026-07-28 or later, as each request states it.
pub(super) struct Session {
    pub(super) revision: ProtocolVersion,
    pub(super) client: ClientConfig,
}

/// A request of this path, made and waited for (until it is dropped).
pub(super) struct Sent {
    pub(super) id: RequestId,
    pub(super) token: ProgressToken,
    name: Arc<str>,
    /// The line to write, until [`Wire::send`] takes it.
    line: Vec<u8>,
    answer: oneshot::Receiver<Vec<u8>>,
    waiting: Arc<Waiting>,
}

impl Drop for Sent {
    fn drop(&mut self) {
        self.waiting.forget(&self.name);
    }
}

/// How a call's answer reads.
pub(super) enum Answer {
    Done(Value),
    Input(InputRequiredResult),
    Failed(ErrorData),
    /// Not a tool result (what rmcp's decoding would also refuse).
    Odd(String),
}

impl Wire {
    /// The direct path over `stdin`, and rmcp's writer sharing it.
    pub(super) fn new(stdin: ChildStdin) -> (Wire, SharedStdin) {
        let stdin = Arc::new(tokio::sync::Mutex::new(stdin));
        let wire = Wire {
            stdin: stdin.clone(),
            waiting: Arc::default(),
            next: AtomicU64::new(1),
            session: None,
        };
        (wire, SharedStdin::new(stdin))
    }

    /// The session the handshake opened, when it has no `initialize` (2026-07-28 and
    /// later): its requests state it.
    pub(super) fn opened(&mut self, session: Session) {
        if !session.revision.has_initialize() {
            self.session = Some(session);
        }
    }

    /// `request` (a `tools/call`) with an id and progress token of this path, its answer
    /// waited for from now on; [`Wire::send`] writes it. `Err` when the server's output
    /// has ended.
    pub(super) fn prepare(&self, mut request: ClientRequest) -> Result<Sent, String> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name: Arc<str> = format!("{PREFIX}{n}").into();
        let token = ProgressToken(NumberOrString::String(name.clone()));
        let meta = request.get_meta_mut();
        if let Some(session) = &self.session {
            meta.set_protocol_version(session.revision.clone());
            meta.set_client_info(session.client.client_info.clone());
            meta.set_client_capabilities(session.client.capabilities.clone());
        }
        meta.set_progress_token(token.clone());
        let id = RequestId::String(name.clone());
        let (tx, answer) = oneshot::channel();
        if !self.waiting.expect(&name, tx) {
            return Err("Transport closed".to_owned());
        }
        let message = ClientJsonRpcMessage::request(request, id.clone());
        let mut sent = Sent {
            id,
            token,
            name,
            line: Vec::new(),
            answer,
            waiting: self.waiting.clone(),
        };
        sent.line = serde_json::to_vec(&message).map_err(|e| e.to_string())?;
        sent.line.push(b'\n');
        Ok(sent)
    }

    /// Writes `sent`'s request, then waits for its answer; `Err` when the server's stdin
    /// or stdout is gone. Dropping this future leaves no part of a line behind: a line
    /// begun is finished.
    pub(super) async fn send(&self, sent: &mut Sent) -> Result<Answer, String> {
        let line = std::mem::take(&mut sent.line);
        write_line(self.stdin.clone(), line)
            .await
            .map_err(|e| e.to_string())?;
        let line = (&mut sent.answer)
            .await
            .map_err(|_| "Transport closed".to_owned())?;
        Ok(read_answer(&line))
    }

    /// Tells the server a request of this path is abandoned (best effort, without
    /// waiting: the server's stdin may be full).
    pub(super) fn cancel(&self, sent: &Sent, reason: &str) {
        let message = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": sent.id, "reason": reason}});
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        tokio::spawn(write_line(self.stdin.clone(), line));
    }
}

/// Writes `line` whole to `stdin` under its lock. A caller that stops waiting midway does
/// not leave half of the line for the next one to be glued to: what is left of a line
/// begun is written by a task of its own ([`Begun`]).
async fn write_line<W: AsyncWrite + Unpin + Send + 'static>(
    stdin: Arc<tokio::sync::Mutex<W>>,
    line: Vec<u8>,
) -> std::io::Result<()> {
    let mut begun = Begun {
        stdin: Some(stdin.lock_owned().await),
        line,
        written: 0,
    };
    while begun.written < begun.line.len() {
        let stdin = begun.stdin.as_mut().expect("held until written");
        // One `write` either writes or, dropped, has written nothing.
        match stdin.write(&begun.line[begun.written..]).await {
            Ok(0) => {
                begun.written = begun.line.len();
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            Ok(n) => begun.written += n,
            Err(e) => {
                begun.written = begun.line.len();
                return Err(e);
            }
        }
    }
    Ok(())
}

/// A line being written under the lock of a server's stdin.
struct Begun<W: AsyncWrite + Unpin + Send + 'static> {
    stdin: Option<OwnedMutexGuard<W>>,
    line: Vec<u8>,
    written: usize,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Drop for Begun<W> {
    fn drop(&mut self) {
        if self.written == 0 || self.written >= self.line.len() {
            return;
        }
        if let Some(mut stdin) = self.stdin.take() {
            let rest = self.line.split_off(self.written);
            tokio::spawn(async move {
                let _ = stdin.write_all(&rest).await;
            });
        }
    }
}

/// Reads a `tools/call` answer as rmcp's client would: a tool result (re-encoded from
/// rmcp's type, as the rmcp path gives it), an input-required result, or an error.
fn read_answer(line: &[u8]) -> Answer {
    #[derive(Deserialize)]
    struct Response {
        result: Option<Value>,
        error: Option<ErrorData>,
    }
    let odd = |e: &dyn std::fmt::Display| Answer::Odd(format!("an unreadable answer: {e}"));
    let response: Response = match serde_json::from_slice(line) {
        Ok(r) => r,
        Err(e) => return odd(&e),
    };
    match (response.result, response.error) {
        (_, Some(error)) => Answer::Failed(error),
        (Some(result), None) => {
            if result.get("resultType").and_then(Value::as_str)
                == Some(ResultType::INPUT_REQUIRED.as_str())
            {
                return InputRequiredResult::deserialize(&result)
                    .map_or_else(|e| odd(&e), Answer::Input);
            }
            match CallToolResult::deserialize(&result).map(serde_json::to_value) {
                Ok(Ok(value)) => Answer::Done(value),
                Ok(Err(e)) | Err(e) => odd(&e),
            }
        }
        (None, None) => Answer::Odd("an answer with neither result nor error".to_owned()),
    }
}

/// The calls of the direct path waiting for their answers, by id; `None` once the
/// connection's output has ended (every waiter is then told).
pub(super) struct Waiting(Mutex<Option<HashMap<Arc<str>, Waiter>>>);

/// Who waits for an answer: its line goes there.
pub(super) type Waiter = oneshot::Sender<Vec<u8>>;

impl Default for Waiting {
    fn default() -> Self {
        Waiting(Mutex::new(Some(HashMap::new())))
    }
}

impl Waiting {
    /// Waits for `name`'s answer; `false` once the output has ended.
    pub(super) fn expect(&self, name: &Arc<str>, tx: Waiter) -> bool {
        let mut calls = self.0.lock().expect("waiting lock");
        calls.as_mut().is_some_and(|c| {
            c.insert(name.clone(), tx);
            true
        })
    }

    fn forget(&self, name: &str) {
        if let Some(calls) = self.0.lock().expect("waiting lock").as_mut() {
            calls.remove(name);
        }
    }

    /// The waiter `line` answers, when it answers a request of this path.
    pub(super) fn claim(&self, line: &[u8]) -> Option<Waiter> {
        let mut calls = self.0.lock().expect("waiting lock");
        let calls = calls.as_mut().filter(|c| !c.is_empty())?;
        #[derive(Deserialize)]
        struct Head {
            id: Option<Value>,
            method: Option<serde::de::IgnoredAny>,
        }
        let head: Head = serde_json::from_slice(line).ok()?;
        if head.method.is_some() {
            return None;
        }
        let Some(Value::String(id)) = head.id else {
            return None;
        };
        if !id.starts_with(PREFIX) {
            return None;
        }
        calls.remove(id.as_str())
    }

    /// The output ended: every waiter is told, and no call waits again.
    pub(super) fn close(&self) {
        self.0.lock().expect("waiting lock").take();
    }
}

/// rmcp's end of the server's stdin: each line it writes is gathered, then written whole
/// under the lock the direct path writes under, so that no line splits another.
pub(super) struct SharedStdin<W = ChildStdin> {
    stdin: Arc<tokio::sync::Mutex<W>>,
    /// The line being gathered.
    partial: Vec<u8>,
    /// Whole lines to write.
    whole: VecDeque<u8>,
    state: Turn<W>,
}

/// Where rmcp's writer is with the lock.
enum Turn<W> {
    Idle,
    Locking(Pin<Box<dyn Future<Output = OwnedMutexGuard<W>> + Send>>),
    Holding(OwnedMutexGuard<W>),
}

impl<W: AsyncWrite + Unpin + Send + 'static> SharedStdin<W> {
    fn new(stdin: Arc<tokio::sync::Mutex<W>>) -> Self {
        SharedStdin {
            stdin,
            partial: Vec::new(),
            whole: VecDeque::new(),
            state: Turn::Idle,
        }
    }

    /// Writes the whole lines gathered, taking the lock for them and giving it back after.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.whole.is_empty() {
            match &mut self.state {
                Turn::Idle => {
                    self.state = Turn::Locking(Box::pin(self.stdin.clone().lock_owned()));
                }
                Turn::Locking(locking) => {
                    let guard = ready!(locking.as_mut().poll(cx));
                    self.state = Turn::Holding(guard);
                }
                Turn::Holding(stdin) => {
                    let (front, _) = self.whole.as_slices();
                    match ready!(Pin::new(&mut **stdin).poll_write(cx, front)) {
                        Ok(0) => return self.give_back(std::io::ErrorKind::WriteZero.into()),
                        Ok(n) => {
                            self.whole.drain(..n);
                        }
                        Err(e) => return self.give_back(e),
                    }
                }
            }
        }
        if let Turn::Holding(stdin) = &mut self.state
            && let Err(e) = ready!(Pin::new(&mut **stdin).poll_flush(cx))
        {
            return self.give_back(e);
        }
        self.state = Turn::Idle;
        Poll::Ready(Ok(()))
    }

    /// A write failed: the lock goes back (the direct path's writes then fail on their
    /// own), and the error to rmcp.
    fn give_back(&mut self, e: std::io::Error) -> Poll<std::io::Result<()>> {
        self.state = Turn::Idle;
        Poll::Ready(Err(e))
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> AsyncWrite for SharedStdin<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        match buf.iter().position(|&b| b == b'\n') {
            Some(end) => {
                this.partial.extend_from_slice(&buf[..=end]);
                this.whole.extend(this.partial.drain(..));
                Poll::Ready(Ok(end + 1))
            }
            None => {
                this.partial.extend_from_slice(buf);
                Poll::Ready(Ok(buf.len()))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().poll_drain(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        // A last line without its newline goes as it is.
        let rest = std::mem::take(&mut this.partial);
        this.whole.extend(rest);
        ready!(this.poll_drain(cx))?;
        loop {
            match &mut this.state {
                Turn::Idle => {
                    this.state = Turn::Locking(Box::pin(this.stdin.clone().lock_owned()));
                }
                Turn::Locking(locking) => {
                    let guard = ready!(locking.as_mut().poll(cx));
                    this.state = Turn::Holding(guard);
                }
                Turn::Holding(stdin) => {
                    let done = ready!(Pin::new(&mut **stdin).poll_shutdown(cx));
                    this.state = Turn::Idle;
                    return Poll::Ready(done);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn answer(line: &str) -> Answer {
        read_answer(line.as_bytes())
    }

    #[test]
    fn an_answer_reads_as_rmcps_client_reads_it() {
        let Answer::Done(v) = answer(
            r#"{"jsonrpc":"2.0","id":"aai-1","result":{"content":[{"type":"text","text":"hi"}],"extra":1}}"#,
        ) else {
            panic!("a tool result");
        };
        // Re-encoded from rmcp's type, as the rmcp path gives it.
        assert_eq!(v["content"][0]["text"], "hi");
        assert!(v.get("extra").is_none(), "{v}");
        let Answer::Failed(e) =
            answer(r#"{"jsonrpc":"2.0","id":"aai-1","error":{"code":-32602,"message":"no"}}"#)
        else {
            panic!("an error");
        };
        assert_eq!((e.code.0, e.message.as_ref()), (-32602, "no"));
        assert!(matches!(
            answer(
                r#"{"jsonrpc":"2.0","id":"aai-1","result":{"resultType":"input_required","inputRequests":{},"requestState":"s"}}"#
            ),
            Answer::Input(_)
        ));
        for odd in [
            r#"{"jsonrpc":"2.0","id":"aai-1","result":5}"#,
            r#"{"jsonrpc":"2.0","id":"aai-1"}"#,
            "not json",
        ] {
            assert!(matches!(answer(odd), Answer::Odd(_)), "{odd}");
        }
    }

    #[test]
    fn only_answers_to_this_paths_ids_are_claimed() {
        let waiting = Waiting::default();
        let claim = |line: &str| waiting.claim(line.as_bytes()).is_some();
        // Nobody waits: nothing is read.
        assert!(!claim(r#"{"jsonrpc":"2.0","id":"aai-1","result":{}}"#));
        let (tx, _rx) = oneshot::channel();
        assert!(waiting.expect(&Arc::from("aai-1"), tx));
        // rmcp's ids, a request of the server's with the same id, another id of ours.
        assert!(!claim(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(!claim(
            r#"{"jsonrpc":"2.0","id":"aai-1","method":"sampling/createMessage"}"#
        ));
        assert!(!claim(r#"{"jsonrpc":"2.0","id":"aai-2","result":{}}"#));
        assert!(claim(r#"{"id" : "aai-1", "jsonrpc":"2.0","result":{}}"#));
        assert!(
            !claim(r#"{"jsonrpc":"2.0","id":"aai-1","result":{}}"#),
            "claimed once"
        );
        // Closed: waiters are told (their sender dropped), and none waits again.
        let (tx, mut rx) = oneshot::channel();
        assert!(waiting.expect(&Arc::from("aai-3"), tx));
        waiting.close();
        assert!(matches!(
            rx.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
        let (tx, _rx) = oneshot::channel();
        assert!(!waiting.expect(&Arc::from("aai-4"), tx));
    }

    #[tokio::test]
    async fn a_line_begun_is_finished_when_its_writer_stops_waiting() {
        let (writer, mut reader) = tokio::io::duplex(64);
        let stdin = Arc::new(tokio::sync::Mutex::new(writer));
        let long = format!("{{\"a\":\"{}\"}}\n", "x".repeat(1000));
        // Nobody reads: the write stops after 64 bytes, and its caller gives up.
        let given_up = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            write_line(stdin.clone(), long.clone().into_bytes()),
        )
        .await;
        assert!(given_up.is_err());
        let next = tokio::spawn(write_line(stdin.clone(), b"{\"b\":1}\n".to_vec()));
        let mut got = vec![0u8; long.len() + 8];
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            reader.read_exact(&mut got),
        )
        .await
        .expect("the rest of the first line, then the second")
        .unwrap();
        next.await.unwrap().unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            format!("{long}{{\"b\":1}}\n")
        );
    }

    #[tokio::test]
    async fn rmcps_lines_and_the_direct_paths_never_split_each_other() {
        let (writer, mut reader) = tokio::io::duplex(64);
        let shared = Arc::new(tokio::sync::Mutex::new(writer));
        let mut rmcp = SharedStdin::new(shared.clone());
        // rmcp writes a long line in pieces while the direct path writes whole lines.
        let long = format!("{{\"rmcp\":\"{}\"}}\n", "x".repeat(1000));
        let direct = {
            let shared = shared.clone();
            tokio::spawn(async move {
                for i in 0..20 {
                    let mut w = shared.lock().await;
                    w.write_all(format!("{{\"direct\":{i}}}\n").as_bytes())
                        .await
                        .unwrap();
                    drop(w);
                    tokio::task::yield_now().await;
                }
            })
        };
        let rmcp_task = tokio::spawn(async move {
            for _ in 0..5 {
                for piece in long.as_bytes().chunks(7) {
                    rmcp.write_all(piece).await.unwrap();
                }
                rmcp.flush().await.unwrap();
            }
        });
        let reading = tokio::spawn(async move {
            let mut all = String::new();
            reader.read_to_string(&mut all).await.unwrap();
            all
        });
        direct.await.unwrap();
        rmcp_task.await.unwrap();
        drop(shared);
        let all = reading.await.unwrap();
        let lines: Vec<&str> = all.lines().collect();
        assert_eq!(lines.len(), 25, "{all}");
        for line in lines {
            serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        }
    }
}
