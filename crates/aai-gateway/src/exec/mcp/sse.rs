//! The HTTP+SSE transport of MCP 2024-11-05, as a client, in message texts (`client.rs`
//! puts rmcp's transport on top and parses each text once; this module does not know
//! rmcp).
//!
//! `GET <url>` with `Accept: text/event-stream` opens the server's event stream. Its first
//! event, `endpoint`, names the URL the client POSTs its messages to (relative to the
//! stream's URL). The server's messages arrive as `message` events whose data is one
//! JSON-RPC message.
//!
//! Bounds and rules:
//! * The message endpoint must be on the stream's origin: a server cannot send the
//!   gateway, and the headers that carry its credential, anywhere else.
//! * A line or an event over 16 MiB ends the stream (as a stdio server's line would), and
//!   so do 16 MiB of comments and ignored lines between two messages.
//! * Parsing is linear: the scan for a line's end goes on where the last chunk's scan
//!   stopped, and a line's bytes are moved once, so a 16 MiB line costs what reading it
//!   costs, however small its chunks.
//! * At most 256 messages wait to be read; the reader waits for room rather than
//!   buffering without limit.
//! * A stream no request needs is closed: while no request either side sent is waiting
//!   for its answer (a cancelled one does not wait), the stream may carry at most 64 KiB
//!   (comments, keep-alives, notifications) and stay open at most 5 minutes. The
//!   connection then ends as when the server hangs up, and the next call opens a new one.
//!   `client.rs` says which requests wait ([`Pending`]).
//! * The stream ends when the server closes it or the session is dropped.
//!
//! The `sse-stream` crate (0.2.6, rmcp's, in the lock file) is not used, and a byte-limit
//! adapter in front of it would not be enough:
//! * it ends the stream with an error at lines the event-stream format says to ignore or
//!   accept: an unknown field, a line without `:` (`InvalidLine`), a second `event:`,
//!   `id:` or `retry:` line in one event (`Duplicated…`), a `retry:` that is not a number,
//!   and bytes that are not UTF-8 (the format decodes them with U+FFFD);
//! * it keeps an unfinished line without limit, so the 16 MiB bound would have to find
//!   line ends itself, which is this parser's work;
//! * it has no hook for the idle-stream byte count above.
//!
//! `a_stream_goes_on_past_lines_sse_stream_refuses` pins each of these lines.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

/// Longest line or event accepted; also the most comments and ignored lines between two
/// messages.
const MAX_EVENT: usize = 16 * 1024 * 1024;
/// Messages read ahead of the client.
const QUEUE: usize = 256;
/// What a stream no request waits on may carry before it is closed.
const IDLE_BYTES: u64 = 64 * 1024;
/// How long a stream no request waits on stays open.
const IDLE_TIME: Duration = Duration::from_secs(300);

/// The requests an SSE session is still needed for: those either side sent that wait for
/// their answer. `client.rs` notes each (by a key of its own: the side and the id); the
/// reader closes the stream when none has waited for a while. Cheap to clone.
#[derive(Clone, Default)]
pub(super) struct Pending(Arc<PendingState>);

#[derive(Default)]
struct PendingState {
    waiting: Mutex<Waiting>,
    /// Told when the set empties or fills.
    changed: Notify,
}

#[derive(Default)]
struct Waiting {
    keys: HashSet<String>,
    /// Bumped whenever a request starts waiting: an idle spell is one value of it.
    spell: u64,
    /// Since when nothing waits (`None` while something does).
    idle_since: Option<Instant>,
}

impl Pending {
    fn new() -> Pending {
        let pending = Pending::default();
        pending.lock().idle_since = Some(Instant::now());
        pending
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.0.waiting.lock().expect("pending lock")
    }

    /// A request now waits for its answer.
    pub(super) fn waits(&self, key: String) {
        let mut w = self.lock();
        w.keys.insert(key);
        w.spell += 1;
        if w.idle_since.take().is_some() {
            self.0.changed.notify_waiters();
        }
    }

    /// The request `key` was answered or cancelled.
    pub(super) fn done(&self, key: &str) {
        let mut w = self.lock();
        if w.keys.remove(key) && w.keys.is_empty() {
            w.idle_since = Some(Instant::now());
            self.0.changed.notify_waiters();
        }
    }

    /// The current idle spell (its number and start), if nothing waits.
    fn idle(&self) -> Option<(u64, Instant)> {
        let w = self.lock();
        w.idle_since.map(|since| (w.spell, since))
    }
}

/// An open SSE session.
pub(super) struct Session {
    poster: Poster,
    incoming: mpsc::Receiver<String>,
    reader: tokio::task::JoinHandle<()>,
    pending: Pending,
}

/// Sends messages to the session's endpoint; cheap to clone.
#[derive(Clone)]
pub(super) struct Poster {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
}

impl Session {
    /// Opens the event stream at `url` and waits for its `endpoint` event.
    pub(super) async fn open(
        client: reqwest::Client,
        url: &str,
        headers: HeaderMap,
    ) -> Result<Session, String> {
        let url = Url::parse(url).map_err(|e| format!("the URL is not valid: {e}"))?;
        let response = client
            .get(url.clone())
            .headers(headers.clone())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| crate::net::describe(&e))?;
        if !response.status().is_success() {
            return Err(format!(
                "the SSE stream answered HTTP {}",
                response.status()
            ));
        }
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if !is_stream {
            return Err("the URL does not answer with an event stream".to_owned());
        }
        let mut events = Events::new(response.bytes_stream());
        let endpoint = loop {
            match events.next().await? {
                Some(event) if event.name == "endpoint" => break event.data,
                Some(_) => {}
                None => return Err("the stream ended before naming its message endpoint".into()),
            }
        };
        let endpoint = url
            .join(endpoint.trim())
            .map_err(|e| format!("the message endpoint is not a URL: {e}"))?;
        if endpoint.origin() != url.origin() {
            return Err(format!(
                "the server named a message endpoint on another origin ({}); refused",
                endpoint.origin().ascii_serialization()
            ));
        }
        let (tx, incoming) = mpsc::channel(QUEUE);
        let pending = Pending::new();
        events.pending = Some((pending.clone(), None));
        let reader = tokio::spawn(read(events, tx, pending.clone(), IDLE_TIME));
        Ok(Session {
            poster: Poster {
                client,
                endpoint,
                headers,
            },
            incoming,
            reader,
            pending,
        })
    }

    /// Where `client.rs` notes the requests that wait for an answer.
    pub(super) fn pending(&self) -> Pending {
        self.pending.clone()
    }

    /// What sends to the server.
    pub(super) fn poster(&self) -> Poster {
        self.poster.clone()
    }

    /// The server's next message (one JSON-RPC message's text); `None` once the stream
    /// ended.
    pub(super) async fn recv(&mut self) -> Option<String> {
        self.incoming.recv().await
    }

    /// Ends the stream.
    pub(super) fn close(&mut self) {
        self.reader.abort();
        self.incoming.close();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Passes the stream's messages on until it ends, the session is dropped, or no request
/// has waited for `idle_time` (the byte bound of an idle stream is `Events`').
async fn read<S, B, E>(
    mut events: Events<S>,
    tx: mpsc::Sender<String>,
    pending: Pending,
    idle_time: Duration,
) where
    S: futures_util::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    loop {
        let changed = pending.0.changed.notified();
        let idle = pending.idle();
        let closes = idle.map(|(_, since)| since + idle_time);
        let next = tokio::select! {
            // `Events::next` keeps its state in `events`: dropping it loses nothing.
            next = events.next() => next,
            () = changed => continue,
            () = sleep_until(closes) => {
                if pending.idle() == idle {
                    tracing::info!("the SSE stream was closed: no request waited on it for {} s", idle_time.as_secs());
                    return;
                }
                continue;
            }
        };
        match next {
            Ok(Some(event)) if event.name == "message" || event.name.is_empty() => {
                if tx.send(event.data).await.is_err() {
                    return;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(why) => {
                tracing::info!("the SSE stream ended: {why}");
                return;
            }
        }
    }
}

/// Sleeps until `when`, or forever.
async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(when) => tokio::time::sleep_until(when).await,
        None => std::future::pending().await,
    }
}

impl Poster {
    /// POSTs one message (its JSON text); the server answers on the stream.
    pub(super) async fn post(&self, message: String) -> Result<(), String> {
        let response = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(message)
            .send()
            .await
            .map_err(|e| crate::net::describe(&e))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!(
                "the message endpoint answered HTTP {}",
                response.status()
            ))
        }
    }
}

/// One server-sent event.
#[derive(Debug, Default, PartialEq)]
struct Event {
    /// `event:` (empty when not given).
    name: String,
    /// `data:` lines, joined by `\n`.
    data: String,
}

/// Server-sent events from a byte stream (the WHATWG event-stream format: `\n`, `\r\n` or
/// `\r` line ends, `:` comments, `event`/`data` fields, an event per blank line).
struct Events<S> {
    bytes: S,
    /// Bytes read and not yet taken as lines; `buffer[start..]` is what is left.
    buffer: Vec<u8>,
    start: usize,
    /// `buffer[start..scanned]` has no line end: the next scan begins at `scanned`.
    scanned: usize,
    event: Event,
    /// A `\r` ended the last line: a `\n` right after it belongs to it.
    after_cr: bool,
    ended: bool,
    /// Bytes of comments and ignored lines since the last event.
    ignored: usize,
    /// Bytes a line-end scan has looked at, in all (the parser's work; tests read it).
    examined: u64,
    /// Bytes read from the stream, in all.
    read: u64,
    /// Once the session runs: its waiting requests, and the idle spell seen last with the
    /// count of bytes read when it began.
    pending: Option<(Pending, Option<(u64, u64)>)>,
}

impl<S, B, E> Events<S>
where
    S: futures_util::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    fn new(bytes: S) -> Self {
        Events {
            bytes,
            buffer: Vec::new(),
            start: 0,
            scanned: 0,
            event: Event::default(),
            after_cr: false,
            ended: false,
            ignored: 0,
            examined: 0,
            read: 0,
            pending: None,
        }
    }

    /// The next whole event; `None` at the end of the stream. Cancel-safe: what was read
    /// stays in `self`.
    async fn next(&mut self) -> Result<Option<Event>, String> {
        loop {
            while let Some(line) = self.line()? {
                if let Some(event) = self.field(&line)? {
                    self.ignored = 0;
                    return Ok(Some(event));
                }
            }
            if self.ended {
                return Ok(None);
            }
            match self.bytes.next().await {
                Some(Ok(chunk)) => {
                    let mut chunk = chunk.as_ref();
                    self.read += chunk.len() as u64;
                    self.check_idle(chunk.len())?;
                    if self.after_cr && chunk.first() == Some(&b'\n') {
                        chunk = &chunk[1..];
                    }
                    self.after_cr = false;
                    // Only an unfinished line is left: move it to the front once.
                    if self.start > 0 {
                        self.buffer.drain(..self.start);
                        self.scanned -= self.start;
                        self.start = 0;
                    }
                    self.buffer.extend_from_slice(chunk);
                }
                Some(Err(e)) => return Err(format!("reading the stream failed: {e}")),
                None => self.ended = true,
            }
        }
    }

    /// Ends the stream when it carried [`IDLE_BYTES`] (`len` more just now) while no
    /// request waited on it.
    fn check_idle(&mut self, len: usize) -> Result<(), String> {
        let Some((pending, seen)) = &mut self.pending else {
            return Ok(());
        };
        let Some((spell, _)) = pending.idle() else {
            *seen = None;
            return Ok(());
        };
        let from = match *seen {
            Some((s, from)) if s == spell => from,
            _ => self.read - len as u64,
        };
        *seen = Some((spell, from));
        if self.read - from > IDLE_BYTES {
            return Err(format!(
                "it carried {} KiB while no request waited on it; closed",
                IDLE_BYTES / 1024
            ));
        }
        Ok(())
    }

    /// The next whole line in the buffer, without its end.
    fn line(&mut self) -> Result<Option<String>, String> {
        let from = self.scanned.max(self.start);
        let found = self.buffer[from..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r');
        self.examined += found.map_or(self.buffer.len() - from, |at| at + 1) as u64;
        let Some(at) = found.map(|at| from + at) else {
            self.scanned = self.buffer.len();
            if self.buffer.len() - self.start > MAX_EVENT {
                return Err("a line of the stream is longer than 16 MiB".into());
            }
            return Ok(None);
        };
        let cr = self.buffer[at] == b'\r';
        let mut end = at + 1;
        if cr {
            match self.buffer.get(at + 1) {
                Some(b'\n') => end += 1,
                Some(_) => {}
                // The `\n` of this `\r\n` may come in the next chunk.
                None => self.after_cr = true,
            }
        }
        let line = String::from_utf8_lossy(&self.buffer[self.start..at]).into_owned();
        self.start = end;
        self.scanned = end;
        if self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
            self.scanned = 0;
        }
        Ok(Some(line))
    }

    /// Applies one line; a blank line completes the event.
    fn field(&mut self, line: &str) -> Result<Option<Event>, String> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if event.data.is_empty() {
                return self.ignore(line);
            }
            return Ok(Some(Event {
                data: event
                    .data
                    .strip_suffix('\n')
                    .unwrap_or(&event.data)
                    .to_owned(),
                name: event.name,
            }));
        }
        if line.starts_with(':') {
            return self.ignore(line);
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => value.clone_into(&mut self.event.name),
            "data" => {
                if self.event.data.len() + value.len() > MAX_EVENT {
                    return Err("an event of the stream is larger than 16 MiB".into());
                }
                self.event.data.push_str(value);
                self.event.data.push('\n');
            }
            _ => return self.ignore(line),
        }
        Ok(None)
    }

    /// Counts a line that makes no event.
    fn ignore(&mut self, line: &str) -> Result<Option<Event>, String> {
        self.ignored += line.len() + 1;
        if self.ignored > MAX_EVENT {
            return Err(
                "the stream sent 16 MiB of comments and ignored lines without a message".into(),
            );
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(chunks: &[&str]) -> Result<Vec<Event>, String> {
        let chunks: Vec<Result<Vec<u8>, String>> =
            chunks.iter().map(|c| Ok(c.as_bytes().to_vec())).collect();
        let mut events = Events::new(futures_util::stream::iter(chunks));
        let mut out = Vec::new();
        while let Some(e) = events.next().await? {
            out.push(e);
        }
        Ok(out)
    }

    fn event(name: &str, data: &str) -> Event {
        Event {
            name: name.into(),
            data: data.into(),
        }
    }

    #[tokio::test]
    async fn events_are_read_across_chunks_and_line_ends() {
        let got = parse(&[
            ": keep-alive\n\nevent: endpoint\r\ndata: /message?sessionId=1",
            "\r",
            "\n\r\nevent: message\ndata: {\"a\":\ndata: 1}\n\ndata:x\rdata:y\r\r",
        ])
        .await
        .unwrap();
        assert_eq!(
            got,
            [
                event("endpoint", "/message?sessionId=1"),
                event("message", "{\"a\":\n1}"),
                event("", "x\ny"),
            ]
        );
    }

    #[tokio::test]
    async fn a_stream_goes_on_past_lines_sse_stream_refuses() {
        // Each of these ends an `sse-stream` 0.2.6 stream; the format ignores or accepts
        // them, and so do we.
        let got = parse(&[
            "unknown: field\nno colon here\nevent: first\nevent: message\n",
            "id: 1\nid: 2\nretry: soon\nretry: 10\ndata: {\"ok\":1}\n\n",
        ])
        .await
        .unwrap();
        assert_eq!(got, [event("message", "{\"ok\":1}")]);
        let bytes: Vec<Result<Vec<u8>, String>> = vec![Ok(b"data: a\xffb\n\n".to_vec())];
        let mut events = Events::new(futures_util::stream::iter(bytes));
        assert_eq!(events.next().await.unwrap(), Some(event("", "a\u{FFFD}b")));
    }

    #[tokio::test]
    async fn a_long_line_in_small_chunks_is_scanned_once() {
        // A 16 MiB event in 4 KiB chunks: rescanning the buffer at each chunk would look
        // at some 32 GiB.
        let line = format!("data: {}\n\n", "x".repeat(MAX_EVENT - 16));
        let chunks: Vec<Result<Vec<u8>, String>> = line
            .as_bytes()
            .chunks(4096)
            .map(|c| Ok(c.to_vec()))
            .collect();
        let mut events = Events::new(futures_util::stream::iter(chunks));
        let event = events.next().await.unwrap().unwrap();
        assert_eq!(event.data.len(), MAX_EVENT - 16);
        assert!(events.next().await.unwrap().is_none());
        assert!(
            events.examined <= line.len() as u64,
            "{} bytes examined for {}",
            events.examined,
            line.len()
        );
    }

    #[tokio::test]
    async fn a_flood_of_comments_ends_the_stream() {
        let comments = ": keep-alive\n".repeat(MAX_EVENT / 13 + 1);
        let err = parse(&[&comments]).await.unwrap_err();
        assert!(err.contains("without a message"), "{err}");
        // Below the limit, with a message after: read.
        let fine = format!("{}data: 1\n\n", ": x\n".repeat(1000));
        assert_eq!(parse(&[&fine]).await.unwrap(), [event("", "1")]);
    }

    /// A server on loopback: its event stream names `/message`, then sends `script`'s
    /// chunks, and comments every millisecond until the client hangs up (which it
    /// reports on the returned channel).
    async fn server(script: Vec<String>) -> (String, tokio::sync::oneshot::Receiver<()>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/sse", listener.local_addr().unwrap());
        let (closed, hung_up) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = [0u8; 4096];
            let _ = socket.read(&mut head).await;
            let mut out = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: endpoint\ndata: /message\n\n".to_owned();
            for part in script {
                out.push_str(&part);
            }
            let comment = format!(": {}\n", "c".repeat(1000));
            let mut sent = socket.write_all(out.as_bytes()).await;
            while sent.is_ok() {
                tokio::time::sleep(Duration::from_millis(1)).await;
                sent = socket.write_all(comment.as_bytes()).await;
            }
            let _ = closed.send(());
        });
        (url, hung_up)
    }

    async fn opened(url: &str) -> Session {
        Session::open(
            crate::net::client(crate::net::Purpose::Api)
                .unwrap()
                .clone(),
            url,
            HeaderMap::new(),
        )
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_stream_no_request_waits_on_is_closed_when_it_carries_only_comments() {
        let (url, hung_up) = server(Vec::new()).await;
        let mut session = opened(&url).await;
        let ended = tokio::time::timeout(Duration::from_secs(20), session.recv()).await;
        assert_eq!(ended, Ok(None), "the stream ends");
        tokio::time::timeout(Duration::from_secs(20), hung_up)
            .await
            .expect("the server saw the client hang up")
            .unwrap();
    }

    #[tokio::test]
    async fn a_stream_a_request_waits_on_stays_open_until_it_is_answered() {
        let (url, _hung_up) = server(vec!["data: {\"id\":1}\n\n".to_owned()]).await;
        let mut session = opened(&url).await;
        let pending = session.pending();
        pending.waits("ours 1".to_owned());
        assert_eq!(session.recv().await.as_deref(), Some("{\"id\":1}"));
        // About 1 MB a second of comments: 64 KiB would have closed an idle stream.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(session.incoming.is_empty() && !session.reader.is_finished());
        pending.done("ours 1");
        let ended = tokio::time::timeout(Duration::from_secs(20), session.recv()).await;
        assert_eq!(ended, Ok(None), "the stream ends once nothing waits");
    }

    #[tokio::test]
    async fn an_idle_stream_is_closed_after_the_idle_time() {
        let idle = Duration::from_millis(400);
        let pending = Pending::new();
        let (tx, mut rx) = mpsc::channel(1);
        // A stream that never sends anything.
        let events = Events::new(futures_util::stream::pending::<Result<Vec<u8>, String>>());
        let reader = tokio::spawn(read(events, tx, pending.clone(), idle));
        pending.waits("ours 1".to_owned());
        tokio::time::sleep(idle * 3).await;
        assert!(!reader.is_finished(), "a waiting request keeps it");
        pending.done("ours 1");
        let ended = tokio::time::timeout(idle * 10, rx.recv()).await;
        assert_eq!(ended, Ok(None));
        assert!(reader.is_finished());
    }

    #[tokio::test]
    async fn a_line_or_event_past_the_limit_ends_the_stream() {
        let long = "x".repeat(MAX_EVENT + 1);
        assert!(parse(&[&long]).await.is_err());
        let line = format!("data: {}\n", "y".repeat(MAX_EVENT / 2));
        assert!(parse(&[&line, &line, &line, "\n"]).await.is_err());
    }
}
