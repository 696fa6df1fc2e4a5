//! stdin and stdout for [`serve`](super::serve).
//!
//! tokio's own stdin and stdout hand every read and every write to a blocking thread:
//! three thread switches per call, a quarter of a warm call's cost. A pipe or a socket
//! (what MCP clients start servers with) is read and written by the runtime's event
//! loop instead, non-blocking. Anything else (a terminal, a file, `/dev/null`) and every
//! other platform keep tokio's blocking stdio.

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
