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
//! * A line or an event over 16 MiB ends the stream (as a stdio server's line would).
//! * At most 256 messages wait to be read; the reader waits for room rather than
//!   buffering without limit.
//! * The stream ends when the server closes it or the session is dropped.

use futures_util::StreamExt as _;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio::sync::mpsc;

/// Longest line or event accepted.
const MAX_EVENT: usize = 16 * 1024 * 1024;
/// Messages read ahead of the client.
const QUEUE: usize = 256;

/// An open SSE session.
pub(super) struct Session {
    poster: Poster,
    incoming: mpsc::Receiver<String>,
    reader: tokio::task::JoinHandle<()>,
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
        let reader = tokio::spawn(async move {
            loop {
                match events.next().await {
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
        });
        Ok(Session {
            poster: Poster {
                client,
                endpoint,
                headers,
            },
            incoming,
            reader,
        })
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
    buffer: Vec<u8>,
    event: Event,
    /// A `\r` ended the last line: a `\n` right after it belongs to it.
    after_cr: bool,
    ended: bool,
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
            event: Event::default(),
            after_cr: false,
            ended: false,
        }
    }

    /// The next whole event; `None` at the end of the stream.
    async fn next(&mut self) -> Result<Option<Event>, String> {
        loop {
            while let Some(line) = self.line()? {
                if let Some(event) = self.field(&line)? {
                    return Ok(Some(event));
                }
            }
            if self.ended {
                return Ok(None);
            }
            match self.bytes.next().await {
                Some(Ok(chunk)) => {
                    let mut chunk = chunk.as_ref();
                    if self.after_cr && chunk.first() == Some(&b'\n') {
                        chunk = &chunk[1..];
                    }
                    self.after_cr = false;
                    self.buffer.extend_from_slice(chunk);
                }
                Some(Err(e)) => return Err(format!("reading the stream failed: {e}")),
                None => self.ended = true,
            }
        }
    }

    /// The next whole line in the buffer, without its end.
    fn line(&mut self) -> Result<Option<String>, String> {
        let Some(at) = self.buffer.iter().position(|&b| b == b'\n' || b == b'\r') else {
            if self.buffer.len() > MAX_EVENT {
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
        let line = String::from_utf8_lossy(&self.buffer[..at]).into_owned();
        self.buffer.drain(..end);
        Ok(Some(line))
    }

    /// Applies one line; a blank line completes the event.
    fn field(&mut self, line: &str) -> Result<Option<Event>, String> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if event.data.is_empty() {
                return Ok(None);
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
            return Ok(None);
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
            _ => {}
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
    async fn a_line_or_event_past_the_limit_ends_the_stream() {
        let long = "x".repeat(MAX_EVENT + 1);
        assert!(parse(&[&long]).await.is_err());
        let line = format!("data: {}\n", "y".repeat(MAX_EVENT / 2));
        assert!(parse(&[&line, &line, &line, "\n"]).await.is_err());
    }
}
