//! A stdio server's stdout as rmcp reads it: whole lines only, none over rmcp's limit,
//! none nested deeper than its parser goes; the answers to the direct path's calls
//! (`direct.rs`) are taken out on the way.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
use tokio::io::{AsyncRead, ReadBuf};

use super::direct::{Waiter, Waiting};

/// Why a stdio connection ended when the server sent a line longer than the transport
/// takes.
pub(super) const OVERSIZED: &str = "the server sent a message over 16 MiB (a result too large to pass on); the connection was closed and is opened again on the next call";

/// A stdio server's stdout, passed on line by line: it ends at the first line longer than
/// rmcp takes (rmcp would drop such a line and read on, so the call it answered would
/// wait for its whole timeout; ending the stream fails the connection's calls at once, and
/// `over` says why), and a line nested deeper than rmcp's JSON parser goes (128 levels)
/// loses the list entries that are that deep ([`drop_deep_entries`]): one tool with a
/// hostile schema must not cost the server its whole `tools/list`.
pub(super) struct Capped<R> {
    inner: R,
    /// The current line so far.
    held: Vec<u8>,
    /// Whole lines ready to be read, the first of them `given` bytes in, and the answers
    /// of the direct path behind them (handed over in their turn: a call's progress,
    /// written before its answer, reaches rmcp first).
    ready: std::collections::VecDeque<Line>,
    given: usize,
    /// The JSON nesting of the current line.
    depth: Depth,
    eof: bool,
    over: Arc<AtomicBool>,
    /// The direct path's calls waiting for their answers (`super::direct`).
    waiting: Option<Arc<Waiting>>,
    /// What each read of the server's stdout fills: zeroed once, not at every read (a
    /// fresh 16 KiB array per read was a third of the proxy path's instructions).
    scratch: Box<[u8]>,
}

/// A whole line of the server's.
enum Line {
    /// For rmcp.
    Rmcp(Vec<u8>),
    /// An answer to a request of the direct path, and who waits for it.
    Answer(Waiter, Vec<u8>),
}

impl<R> Drop for Capped<R> {
    fn drop(&mut self) {
        // The connection's output is gone: the direct path's calls are told.
        if let Some(waiting) = &self.waiting {
            waiting.close();
        }
    }
}

/// How much one read of the server's stdout takes at most.
const READ_CHUNK: usize = 16 * 1024;

impl<R> Capped<R> {
    pub(super) fn new(inner: R, over: Arc<AtomicBool>, waiting: Option<Arc<Waiting>>) -> Capped<R> {
        Capped {
            inner,
            held: Vec::new(),
            ready: std::collections::VecDeque::new(),
            given: 0,
            depth: Depth::default(),
            eof: false,
            over,
            waiting,
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }

    /// Takes in `bytes`: whole lines become ready.
    fn take(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.over.load(Ordering::Relaxed) {
                return;
            }
            let newline = bytes.iter().position(|&b| b == b'\n');
            let (part, rest) = bytes.split_at(newline.map_or(bytes.len(), |i| i + 1));
            let body = &part[..part.len() - usize::from(newline.is_some())];
            if self.held.len() + body.len() > DEFAULT_MAX_LINE_LENGTH {
                // The whole lines before this one are kept; the stream ends after them.
                self.held = Vec::new();
                self.over.store(true, Ordering::Relaxed);
                return;
            }
            body.iter().for_each(|&b| self.depth.feed(b));
            self.held.extend_from_slice(part);
            if newline.is_some() {
                let mut line = std::mem::take(&mut self.held);
                if self.depth.deepest > DEEPEST {
                    line = drop_deep_entries(&line);
                }
                match self.waiting.as_ref().and_then(|w| w.claim(&line)) {
                    Some(waiter) if self.ready.is_empty() => {
                        let _ = waiter.send(line);
                    }
                    Some(waiter) => self.ready.push_back(Line::Answer(waiter, line)),
                    None => self.ready.push_back(Line::Rmcp(line)),
                }
                self.depth = Depth::default();
            }
            bytes = rest;
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Capped<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some(Line::Answer(..)) = this.ready.front() {
                if let Some(Line::Answer(waiter, line)) = this.ready.pop_front() {
                    let _ = waiter.send(line);
                }
                continue;
            }
            if let Some(Line::Rmcp(line)) = this.ready.front() {
                // At most one line per read, each a unit of the task's budget: rmcp starts
                // a task for every notification it reads, and a server that floods them
                // must not get ahead of those tasks (300,000 progress notifications once
                // held 400 MB). Out of budget, the reader waits its turn behind them.
                let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
                let n = buf.remaining().min(line.len() - this.given);
                buf.put_slice(&line[this.given..this.given + n]);
                this.given += n;
                if this.given == line.len() {
                    this.ready.pop_front();
                    this.given = 0;
                }
                coop.made_progress();
                return Poll::Ready(Ok(()));
            }
            if this.eof || this.over.load(Ordering::Relaxed) {
                if let Some(waiting) = &this.waiting {
                    waiting.close();
                }
                return Poll::Ready(Ok(())); // end of stream
            }
            let mut read = ReadBuf::new(&mut this.scratch);
            std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let filled = read.filled().len();
            if filled == 0 {
                // The end: a last line without its newline goes as it is.
                this.eof = true;
                let rest = std::mem::take(&mut this.held);
                if !rest.is_empty() {
                    this.ready.push_back(Line::Rmcp(rest));
                }
            } else {
                let bytes = std::mem::take(&mut this.scratch);
                this.take(&bytes[..filled]);
                this.scratch = bytes;
            }
        }
    }
}

/// Deeper than this, a line's list entries are dropped (serde_json, under rmcp, stops at
/// 128 levels and drops the whole line).
const DEEPEST: usize = 120;

/// JSON nesting, fed byte by byte (strings skipped).
#[derive(Debug, Default, Clone, Copy)]
struct Depth {
    now: usize,
    deepest: usize,
    in_string: bool,
    escaped: bool,
}

impl Depth {
    fn feed(&mut self, b: u8) {
        if self.in_string {
            match (self.escaped, b) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => {
                self.now += 1;
                self.deepest = self.deepest.max(self.now);
            }
            b'}' | b']' => self.now = self.now.saturating_sub(1),
            _ => {}
        }
    }
}

/// `line` without the entries of its lists (arrays three levels in, such as
/// `result.tools`) that nest deeper than [`DEEPEST`], commas mended; the rest of the
/// message is kept as it is. A line whose deep part is elsewhere comes back unchanged
/// (rmcp then drops it, as before).
fn drop_deep_entries(line: &[u8]) -> Vec<u8> {
    // (start, end, where its list opened) of each entry to drop.
    let mut drop: Vec<(usize, usize, usize)> = Vec::new();
    let mut depth = Depth::default();
    // The entry of a depth-3 list being read: where it starts and how deep it goes.
    let mut entry: Option<(usize, usize)> = None;
    let mut list_open = false;
    let mut list_at = 0;
    for (i, &b) in line.iter().enumerate() {
        let before = depth;
        depth.feed(b);
        if before.in_string || depth.in_string && b == b'"' {
            if let Some((_, deepest)) = entry.as_mut() {
                *deepest = (*deepest).max(depth.now);
            }
            continue;
        }
        match b {
            b'[' if depth.now == 3 => {
                list_open = true;
                list_at = i;
            }
            b']' if before.now == 3 => {
                if let Some((start, deepest)) = entry.take()
                    && deepest > DEEPEST
                {
                    drop.push((start, i, list_at));
                }
                list_open = false;
            }
            b',' if list_open && depth.now == 3 => {
                if let Some((start, deepest)) = entry.take()
                    && deepest > DEEPEST
                {
                    drop.push((start, i, list_at));
                }
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ if list_open && before.now == 3 && entry.is_none() => entry = Some((i, depth.now)),
            _ => {}
        }
        if let Some((_, deepest)) = entry.as_mut() {
            *deepest = (*deepest).max(depth.now);
        }
    }
    if drop.is_empty() {
        return line.to_vec();
    }
    let mut out = Vec::with_capacity(line.len());
    let mut at = 0;
    for (start, end, list_at) in drop {
        // The entry and the comma after it (else the comma before it, within its list)
        // go.
        let mut cut_start = start;
        let mut cut_end = end;
        let from = at.max(list_at + 1);
        if line.get(end) == Some(&b',') {
            cut_end = end + 1;
        } else if from < start
            && let Some(comma) = line[from..start].iter().rposition(|&c| c == b',')
        {
            cut_start = from + comma;
        }
        out.extend_from_slice(&line[at..cut_start.max(at)]);
        at = cut_end;
    }
    out.extend_from_slice(&line[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[tokio::test]
    async fn an_answer_of_the_direct_path_waits_for_the_lines_before_it() {
        use tokio::io::AsyncReadExt;
        let waiting = Arc::new(Waiting::default());
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        assert!(waiting.expect(&Arc::from("aai-1"), tx));
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"aai-1","progress":1}}"#;
        let ours = r#"{"jsonrpc":"2.0","id":"aai-1","result":{}}"#;
        let rmcps = r#"{"jsonrpc":"2.0","id":2,"result":{}}"#;
        let data = format!("{progress}\n{ours}\n{rmcps}\n");
        let over = Arc::new(AtomicBool::new(false));
        let mut capped = Capped::new(data.as_bytes(), over, Some(waiting.clone()));
        let mut buf = vec![0u8; 4096];
        let n = capped.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], format!("{progress}\n").as_bytes());
        assert!(
            rx.try_recv().is_err(),
            "the answer waits for the progress before it"
        );
        // rmcp's own answer passes on; ours was handed over on the way, not to rmcp.
        let n = capped.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], format!("{rmcps}\n").as_bytes());
        assert_eq!(rx.try_recv().unwrap(), format!("{ours}\n").as_bytes());
        // The end of the server's output tells every waiter, and none waits again.
        let (tx, mut late) = tokio::sync::oneshot::channel();
        assert!(waiting.expect(&Arc::from("aai-2"), tx));
        assert_eq!(capped.read(&mut buf).await.unwrap(), 0);
        assert!(matches!(
            late.try_recv(),
            Err(tokio::sync::oneshot::error::TryRecvError::Closed)
        ));
        let (tx, _rx) = tokio::sync::oneshot::channel();
        assert!(!waiting.expect(&Arc::from("aai-3"), tx));
    }

    #[tokio::test]
    async fn an_oversized_line_ends_the_stream_after_the_whole_lines() {
        use tokio::io::AsyncReadExt;
        let mut data = b"{\"ok\":1}\n".to_vec();
        data.extend(std::iter::repeat_n(b'x', DEFAULT_MAX_LINE_LENGTH + 10));
        data.extend(b"\n{\"after\":1}\n");
        let over = Arc::new(AtomicBool::new(false));
        let mut capped = Capped::new(&data[..], over.clone(), None);
        let mut out = Vec::new();
        capped.read_to_end(&mut out).await.unwrap();
        assert!(over.load(Ordering::SeqCst));
        assert!(out.starts_with(b"{\"ok\":1}\n"));
        assert!(out.len() <= 9 + DEFAULT_MAX_LINE_LENGTH, "{}", out.len());
        assert!(!out.ends_with(b"{\"after\":1}\n"));
    }

    #[tokio::test]
    async fn each_read_gives_at_most_one_line_and_spends_the_tasks_budget() {
        use tokio::io::AsyncReadExt;
        let data = b"{\"a\":10}\n{\"b\":2}\nlast, without a newline".to_vec();
        let mut capped = Capped::new(&data[..], Arc::new(AtomicBool::new(false)), None);
        let mut reads = Vec::new();
        let mut buf = [0u8; 4];
        loop {
            let n = capped.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            reads.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        // A line longer than the buffer comes in parts; no read spans two lines.
        assert_eq!(
            reads,
            [
                "{\"a\"", ":10}", "\n", "{\"b\"", ":2}\n", "last", ", wi", "thou", "t a ", "newl",
                "ine"
            ]
        );
        // 300 lines in one chunk: the reader runs out of budget (128 a turn) and yields
        // to the tasks the lines started, instead of reading them all in one turn.
        let many = "{}\n".repeat(300);
        let mut capped = Capped::new(many.as_bytes(), Arc::new(AtomicBool::new(false)), None);
        let mut line = [0u8; 3];
        let mut in_one_turn = 0;
        while tokio::task::coop::has_budget_remaining() {
            assert_eq!(capped.read(&mut line).await.unwrap(), 3);
            in_one_turn += 1;
        }
        assert!(
            in_one_turn < 300,
            "{in_one_turn} lines read without yielding"
        );
    }

    #[tokio::test]
    async fn a_list_entry_too_deep_for_the_parser_is_dropped_and_the_rest_kept() {
        use tokio::io::AsyncReadExt;
        let deep = format!("{}1{}", "{\"a\":".repeat(200), "}".repeat(200));
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{{"name":"first","inputSchema":{{}}}},{{"name":"deep","inputSchema":{deep}}},{{"name":"last","s":"[{{,"}}]}}}}"#
        );
        let data = format!("{{\"ok\":1}}\n{line}\n");
        let mut capped = Capped::new(data.as_bytes(), Arc::new(AtomicBool::new(false)), None);
        let mut out = Vec::new();
        capped.read_to_end(&mut out).await.unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("{\"ok\":1}"));
        let kept: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        let names: Vec<&str> = kept["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["first", "last"]);
        // The deep one last, or alone: the commas still fit.
        for tools in [format!(r#"[{{"name":"a"}},{deep}]"#), format!("[{deep}]")] {
            let line = format!(r#"{{"id":1,"result":{{"tools":{tools}}}}}"#);
            let fixed = drop_deep_entries(line.as_bytes());
            serde_json::from_slice::<Value>(&fixed)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&fixed)));
        }
    }
}
