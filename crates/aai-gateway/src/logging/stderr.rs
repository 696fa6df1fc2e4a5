//! The server's stderr, which a client may pipe and never read: a log line is written
//! only when stderr takes it at once, else it is left out (the log file has every line)
//! and the next line that is written says how many were.
//!
//! A blocking write to a full pipe (64 KiB on Linux) would stall whichever thread logs,
//! and soon every call. `poll` saying a pipe or socket is writable means `PIPE_BUF` bytes
//! of it are free (a page on Linux, 512 bytes on the BSDs and macOS): a line of at most
//! that many bytes, written under the lock, never blocks, and a longer one is cut. A
//! terminal or a file is written as it always was, whole.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::sync::{Mutex, PoisonError};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::stat::{SFlag, fstat};

/// The most written for one line to a pipe: `PIPE_BUF`, what `poll` promises is free.
#[cfg(any(target_os = "linux", target_os = "android"))]
const MOST: usize = 4_096;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const MOST: usize = 512;

/// Writes each line to `W` when it takes it at once; counts the ones left out.
#[derive(Debug)]
pub(crate) struct UnlessFull<W> {
    inner: Mutex<(W, u64)>,
    /// A pipe or a socket, which a reader may leave full (else: written as it is).
    pipe: bool,
}

impl<W: Write + AsFd> UnlessFull<W> {
    pub(crate) fn new(out: W) -> UnlessFull<W> {
        let pipe = fstat(out.as_fd()).is_ok_and(|st| {
            let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
            kind == SFlag::S_IFIFO || kind == SFlag::S_IFSOCK
        });
        UnlessFull {
            inner: Mutex::new((out, 0)),
            pipe,
        }
    }

    /// Writes `line` (one formatted event) now, or leaves it out.
    fn line(&self, line: &[u8]) -> io::Result<()> {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (out, left_out) = &mut *guard;
        if !self.pipe {
            return out.write_all(line);
        }
        let mut ready = [PollFd::new(out.as_fd(), PollFlags::POLLOUT)];
        let writable = match poll(&mut ready, PollTimeout::ZERO) {
            Ok(n) => {
                n > 0
                    && ready[0]
                        .revents()
                        .is_some_and(|r| r.contains(PollFlags::POLLOUT))
            }
            // Cannot tell: write, as stderr always was.
            Err(_) => true,
        };
        if !writable {
            *left_out += 1;
            return Ok(());
        }
        let mut text = Vec::with_capacity(line.len().min(MOST) + 96);
        if *left_out > 0 {
            let _ = writeln!(
                text,
                "aai-gateway: {left_out} log line(s) left out here while stderr was full; the log file has them"
            );
        }
        text.extend_from_slice(line);
        if text.len() > MOST {
            // Cut on a character's first byte, and end the line.
            let mut cut = MOST - "…\n".len();
            while cut > 0 && text[cut] & 0xC0 == 0x80 {
                cut -= 1;
            }
            text.truncate(cut);
            text.extend_from_slice("…\n".as_bytes());
        }
        out.write_all(&text)?;
        *left_out = 0;
        Ok(())
    }
}

/// One event's writer: the formatter writes the whole line with one `write_all`.
pub(crate) struct Line<'a, W> {
    to: &'a UnlessFull<W>,
}

impl<W: Write + AsFd> Write for Line<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.to.line(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a, W: Write + AsFd + 'a> tracing_subscriber::fmt::MakeWriter<'a> for UnlessFull<W> {
    type Writer = Line<'a, W>;

    fn make_writer(&'a self) -> Self::Writer {
        Line { to: self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use tracing_subscriber::fmt::MakeWriter;

    fn nonblocking(file: &std::io::PipeReader) {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        let flags = OFlag::from_bits_truncate(fcntl(file, FcntlArg::F_GETFL).unwrap());
        fcntl(file, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).unwrap();
    }

    /// A pipe nobody reads takes lines until it is full, then leaves them out without
    /// blocking; once read, the next line says how many were left out.
    #[test]
    fn a_full_pipe_leaves_lines_out_and_the_next_line_says_so() {
        let (mut read, write) = std::io::pipe().unwrap();
        let out = UnlessFull::new(write);
        let line = format!("{}\n", "x".repeat(199));
        // A pipe holds at most 64 KiB (Linux: 20 such lines a page, 16 pages): the rest
        // are left out, and the test ends.
        for _ in 0..1_000 {
            out.make_writer().write_all(line.as_bytes()).unwrap();
        }
        let left_out = out.inner.lock().unwrap().1;
        assert!((600..1_000).contains(&left_out), "{left_out}");
        nonblocking(&read);
        let mut drained = Vec::new();
        let _ = read.read_to_end(&mut drained);
        assert_eq!(drained.len() % line.len(), 0, "only whole lines");
        assert_eq!(drained.len() / line.len() + left_out as usize, 1_000);

        out.make_writer().write_all(b"after\n").unwrap();
        let mut next = String::new();
        let _ = read.read_to_string(&mut next);
        assert_eq!(
            next,
            format!(
                "aai-gateway: {left_out} log line(s) left out here while stderr was full; the log file has them\nafter\n"
            )
        );
        assert_eq!(out.inner.lock().unwrap().1, 0);
    }

    #[test]
    fn a_line_longer_than_a_page_is_cut_to_one() {
        let (mut read, write) = std::io::pipe().unwrap();
        let out = UnlessFull::new(write);
        out.make_writer()
            .write_all(format!("{}\n", "é".repeat(10_000)).as_bytes())
            .unwrap();
        drop(out);
        let mut got = String::new();
        read.read_to_string(&mut got).unwrap();
        assert!(got.len() <= MOST && got.ends_with("…\n"), "{}", got.len());
    }

    #[test]
    fn a_file_takes_every_line_whole() {
        let file = tempfile::tempfile().unwrap();
        let out = UnlessFull::new(file.try_clone().unwrap());
        assert!(!out.pipe);
        let long = format!("{}\n", "y".repeat(3 * MOST));
        for _ in 0..100 {
            out.make_writer().write_all(long.as_bytes()).unwrap();
        }
        assert_eq!(file.metadata().unwrap().len(), 100 * long.len() as u64);
    }
}
