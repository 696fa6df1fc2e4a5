//! The one thread every scan runs on.
//!
//! glibc's malloc keeps an arena per thread that allocates. Scans spread over tokio's
//! blocking pool each left what they freed in a different arena, where the next scan,
//! on another thread, could not reuse it: RSS grew with every change (54 MiB after
//! start-up at 10,000 apps, 266 MiB after ten changes). On one thread, what a scan frees
//! is what the next one allocates from (docs/performance.md, "Over a gateway's life").

use std::sync::mpsc;

/// Work for the scanning thread.
type Job = Box<dyn FnOnce() + Send>;

/// Runs jobs one after another on a thread of its own, started on first use; the thread
/// ends when the scanner is dropped.
#[derive(Debug, Default)]
pub(super) struct Scanner {
    jobs: std::sync::OnceLock<mpsc::Sender<Job>>,
}

impl Scanner {
    /// Runs `job` on the scanning thread and waits for its result. Not to be called from
    /// a job (it would wait for itself).
    pub(super) fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            let _ = tx.send(job());
        });
        match self.jobs().send(job) {
            Ok(()) => rx
                .recv()
                .expect("the scanning thread runs every job it takes"),
            // The thread could not be started: the job runs here.
            Err(mpsc::SendError(job)) => {
                job();
                rx.recv().expect("the job ran here")
            }
        }
    }

    fn jobs(&self) -> &mpsc::Sender<Job> {
        self.jobs.get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name("aai-scan".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                });
            if let Err(e) = started {
                tracing::warn!("no scanning thread ({e}); scans run where they are asked for");
            }
            tx
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Scanner;

    #[test]
    fn every_job_runs_on_the_same_thread_in_turn() {
        let scanner = std::sync::Arc::new(Scanner::default());
        let here = std::thread::current().id();
        let first = scanner.run(|| std::thread::current().id());
        let callers: Vec<_> = (0..4)
            .map(|_| {
                let scanner = scanner.clone();
                std::thread::spawn(move || scanner.run(|| std::thread::current().id()))
            })
            .collect();
        assert_ne!(first, here);
        for caller in callers {
            assert_eq!(caller.join().unwrap(), first);
        }
    }
}
