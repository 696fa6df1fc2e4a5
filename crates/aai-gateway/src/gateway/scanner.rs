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
        // A job that panics fails its caller, with its own panic; the thread goes on.
        let job: Job = Box::new(move || {
            let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)));
        });
        if let Err(mpsc::SendError(job)) = self.jobs().send(job) {
            // The thread could not be started: the job runs here.
            job();
        }
        match rx.recv().expect("every job sends its outcome") {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
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
        // A job's panic reaches its caller, and the thread still runs the next job.
        let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            scanner.run(|| panic!("the scan failed"))
        }));
        let message = failed.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"the scan failed"));
        assert_eq!(scanner.run(|| std::thread::current().id()), first);
    }
}
