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
//! Everything else passes through untouched, in both directions. The requests of an
//! initialized session that are most of its traffic (`tools/call`, `tools/list`,
//! `resources/read`, `ping`) are answered without rmcp's service loop (`direct.rs`).
//! Every line to the client (rmcp's and the direct path's answers) leaves through one
//! queue, in the order it was queued: a call's answer follows the progress rmcp sent
//! for it.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::ErrorCode;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, PollSender};

use super::Server;
use crate::gateway::Handle;
use crate::lines::read_line_capped;
use check::{check, error, recover_id, response_id};
use direct::Direct;

mod check;
mod direct;
mod pipes;

/// Longest accepted line (rmcp's own limit).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// How long the answers already made may take to reach the client once the session ends.
const ANSWER_GRACE: Duration = Duration::from_millis(500);

/// How long, after [`ANSWER_GRACE`], the line being written may take to go out whole.
const LINE_GRACE: Duration = Duration::from_secs(5);

/// How long after the client's input ends the session may take to end (rmcp gives the
/// calls in flight 5 s; the direct path's calls get as long).
const CLOSE_GRACE: Duration = Duration::from_secs(6);

/// Lines waiting to be written to the client; a writer waits when it is full.
const QUEUED_LINES: usize = 64;

/// At most this much queued output is gathered into one write.
const GATHER: usize = 64 * 1024;

/// Serves MCP on stdin/stdout until the client leaves or the gateway stops (the
/// gateway's background work is the lifecycle's: `gateway::Lifecycle::serve`).
pub async fn serve(gateway: Handle) -> anyhow::Result<()> {
    let (input, output, _restore) = pipes::stdio();
    serve_on(gateway, input, output).await
}

/// A line for the client.
enum Outgoing {
    /// Written by rmcp: when it is a response, it ends its id's time in flight.
    Rmcp(Vec<u8>),
    /// An answer of the direct path, and its id (as JSON text), whose time in flight ends
    /// when it is written.
    Answer(Vec<u8>, String),
}

/// [`serve`] over any pair of pipes.
pub async fn serve_on(
    gateway: Handle,
    input: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> anyhow::Result<()> {
    let (rmcp_input, to_rmcp) = tokio::io::duplex(1 << 16);
    let (queue, queued) = mpsc::channel(QUEUED_LINES);
    let rmcp_output = Lines::new(queue.clone());
    let output = Arc::new(tokio::sync::Mutex::new(output));
    let in_flight: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let direct: Arc<OnceLock<Arc<Direct>>> = Arc::default();
    let (quit, drain) = (CancellationToken::new(), CancellationToken::new());
    let mut inbound = tokio::spawn(inbound(
        input,
        to_rmcp,
        output.clone(),
        in_flight.clone(),
        direct.clone(),
        quit.clone(),
    ));
    let mut outbound = tokio::spawn(outbound(queued, output, in_flight.clone(), drain.clone()));
    // A stop asked for before the client's `initialize` ends the wait for it, and a
    // client that leaves before it ends the session as one that leaves after it.
    let server = Server::new(gateway.clone(), "stdio");
    let service = tokio::select! {
        service = server.serve((rmcp_input, rmcp_output)) => match service {
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
        let session = Arc::new(Direct::new(
            service.service().clone(),
            service.peer().clone(),
            queue,
            in_flight,
        ));
        let _ = direct.set(session.clone());
        // Once the client's input ends, rmcp answers what is in flight (for at most 5 s)
        // and ends the session, and the direct path's calls end too; neither can when its
        // answers wait on a client that no longer reads, so that wait is bounded too.
        let closed = async {
            let _ = (&mut inbound).await;
            input_ended = true;
            tokio::time::sleep(CLOSE_GRACE).await;
        };
        let ended = async {
            let reason = service.waiting().await;
            tracing::info!("client session ended: {reason:?}");
            session.close();
            session.idle().await;
        };
        tokio::select! {
            () = ended => {}
            () = gateway.stopping() => {
                cancel.cancel();
                session.stop();
            }
            () = closed => {
                tracing::info!("the session did not end {CLOSE_GRACE:?} after the client's input did");
                cancel.cancel();
                session.stop();
            }
        }
    } else {
        drop(queue);
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

/// Client → rmcp (or the direct path): checks each line, answers the broken ones itself.
/// Once `quit` is cancelled no new line is read; an answer being written is finished.
async fn inbound(
    input: impl tokio::io::AsyncRead + Unpin,
    mut to_rmcp: impl AsyncWrite + Unpin,
    output: Arc<tokio::sync::Mutex<impl AsyncWrite + Unpin>>,
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
    direct: Arc<OnceLock<Arc<Direct>>>,
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
            Ok(message) => {
                if let Some(direct) = direct.get()
                    && (direct.take(&message) || direct.cancel(&message))
                {
                    continue;
                }
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
    if let Some(direct) = direct.get() {
        direct.close();
    }
    // End of input: rmcp sees it too and ends the session.
    let _ = to_rmcp.shutdown().await;
}

/// The queue → client: writes each line whole, gathering what is queued into one write,
/// and notes which ids rmcp answered. Ends when every writer has gone (rmcp's transport
/// and the direct path's calls); once `drain` is cancelled no new line is started.
async fn outbound(
    mut queued: mpsc::Receiver<Outgoing>,
    output: Arc<tokio::sync::Mutex<impl AsyncWrite + Unpin>>,
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
    drain: CancellationToken,
) {
    let mut gathered = Vec::with_capacity(4096);
    while let Some(first) = queued.recv().await {
        let mut next = Some(first);
        gathered.clear();
        while let Some(line) = next.take() {
            if drain.is_cancelled() {
                break;
            }
            let line = match line {
                Outgoing::Rmcp(line) => {
                    if let Some(id) = response_id(&line) {
                        in_flight.lock().expect("in-flight lock").remove(&id);
                    }
                    line
                }
                Outgoing::Answer(line, id) => {
                    in_flight.lock().expect("in-flight lock").remove(&id);
                    line
                }
            };
            if gathered.is_empty() {
                gathered = line;
            } else {
                gathered.extend_from_slice(&line);
            }
            if gathered.len() < GATHER {
                next = queued.try_recv().ok();
            }
        }
        if gathered.is_empty() {
            break;
        }
        let mut out = output.lock().await;
        if out.write_all(&gathered).await.is_err() || out.flush().await.is_err() {
            break;
        }
    }
}

/// rmcp's end of the output: what it writes goes to the queue a whole line at a time, in
/// order. A flush ends once the last line is queued, so what rmcp has sent (a call's
/// progress) is queued before anything the caller queues after.
struct Lines {
    queue: PollSender<Outgoing>,
    /// The line being written.
    partial: Vec<u8>,
    /// A whole line waiting for room in the queue.
    whole: Option<Vec<u8>>,
}

impl Lines {
    fn new(queue: mpsc::Sender<Outgoing>) -> Self {
        Self {
            queue: PollSender::new(queue),
            partial: Vec::new(),
            whole: None,
        }
    }

    /// Queues the whole line waiting, if any.
    fn poll_queue(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.whole.is_none() {
            return Poll::Ready(Ok(()));
        }
        let gone = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        ready!(self.queue.poll_reserve(cx)).map_err(|_| gone())?;
        let line = self.whole.take().expect("a line waits");
        self.queue
            .send_item(Outgoing::Rmcp(line))
            .map_err(|_| gone())?;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Lines {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_queue(cx))?;
        match buf.iter().position(|&b| b == b'\n') {
            Some(end) => {
                this.partial.extend_from_slice(&buf[..=end]);
                this.whole = Some(std::mem::take(&mut this.partial));
                Poll::Ready(Ok(end + 1))
            }
            None => {
                this.partial.extend_from_slice(buf);
                Poll::Ready(Ok(buf.len()))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().poll_queue(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_queue(cx))?;
        this.queue.close();
        Poll::Ready(Ok(()))
    }
}
