//! A PostgreSQL cluster of the test's own (as `tests/mcp/pg.py`): Debian's `postgresql`
//! binaries, `initdb` into a temporary folder, `postgres` on a free loopback port (and a
//! socket in that folder), stopped by its PID when the cluster is dropped.
//!
//! initdb and postgres refuse to run as root: as root, the cluster runs as Debian's
//! `postgres` user (or `nobody`), in a folder that user owns; as anyone else, as themselves.

#![allow(clippy::disallowed_methods)] // The test starts its own peer.

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The password of the cluster's superuser `aai` (host connections use scram-sha-256).
pub(crate) const PASSWORD: &str = "pg-s3cret-passw0rd";

/// A running cluster; dropping it stops the server and removes its folder.
#[derive(Debug)]
pub(crate) struct Cluster {
    bin: PathBuf,
    port: u16,
    server: Child,
    // Last: removed after the server has stopped.
    dir: tempfile::TempDir,
}

/// The folder of the newest installed server's binaries.
fn bin_dir() -> Option<PathBuf> {
    let versions = std::fs::read_dir("/usr/lib/postgresql").ok()?;
    versions
        .filter_map(|e| {
            let e = e.ok()?;
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version)
        .map(|(_, bin)| bin)
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// Who runs the server: `None` for this process's user, else the uid and gid of
/// `postgres` (or `nobody`), for a process that runs as root.
fn server_user() -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let user = ["postgres", "nobody"]
        .iter()
        .find_map(|name| nix::unistd::User::from_name(name).ok().flatten())
        .expect("running as root, and neither `postgres` nor `nobody` exists");
    Some((user.uid.as_raw(), user.gid.as_raw()))
}

impl Cluster {
    /// A new cluster, started. Without the server's binaries: a failure when
    /// `AAI_TEST_REQUIRE_PEERS=1`, else `None` after a loud message (the test skips).
    pub(crate) fn start() -> Option<Cluster> {
        let Some(bin) = bin_dir() else {
            let why = "PostgreSQL's server binaries are not installed (no /usr/lib/postgresql/*/bin/initdb; apt-get install postgresql)";
            if std::env::var("AAI_TEST_REQUIRE_PEERS").as_deref() == Ok("1") {
                panic!("{why}, and AAI_TEST_REQUIRE_PEERS=1 requires them");
            }
            // Straight to stderr: the test harness does not capture it, so it shows.
            let _ = writeln!(
                std::io::stderr(),
                "\n*** SKIPPING: {why}: the shared store is NOT tested ***\n"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("aai-pg-")
            .tempdir()
            .expect("a temporary folder");
        let user = server_user();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown");
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, format!("{PASSWORD}\n")).expect("the password file");
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid)).expect("chown");
        }
        let data = dir.path().join("data");
        let out = server_command(&bin.join("initdb"), dir.path(), user)
            .arg("-D")
            .arg(&data)
            .args(["-U", "aai", "-E", "UTF8", "--auth-local=trust"])
            .args(["--auth-host=scram-sha-256", "--no-sync"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("postgres.log")).expect("the log");
        let server = server_command(&bin.join("postgres"), dir.path(), user)
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string()])
            .arg("-k")
            .arg(dir.path())
            .args(["-h", "127.0.0.1", "-c", "fsync=off"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("postgres starts");
        let mut cluster = Cluster {
            bin,
            port,
            server,
            dir,
        };
        cluster.wait_ready();
        Some(cluster)
    }

    /// Waits (at most 30 s) until the server accepts connections.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.server.try_wait().expect("the server's status") {
                panic!("postgres exited ({status}): {}", self.log());
            }
            let ready = Command::new(self.bin.join("pg_isready"))
                .env_clear()
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .expect("pg_isready runs");
            if ready.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("postgres did not start within 30 s: {}", self.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// Creates database `name` (over the socket, as the superuser `aai`).
    pub(crate) fn create_db(&self, name: &str) {
        let out = Command::new(self.bin.join("createdb"))
            .env_clear()
            .arg("-h")
            .arg(self.dir.path())
            .args(["-p", &self.port.to_string(), "-U", "aai", name])
            .output()
            .expect("createdb runs");
        assert!(
            out.status.success(),
            "createdb {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The URL of database `db` over TCP, with the password, without TLS.
    pub(crate) fn url(&self, db: &str) -> String {
        format!(
            "postgres://aai:{PASSWORD}@127.0.0.1:{}/{db}?sslmode=disable",
            self.port
        )
    }
}

/// `program` with an explicit environment, in `dir`, as `user` when given.
fn server_command(program: &Path, dir: &Path, user: Option<(u32, u32)>) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("HOME", dir)
        .current_dir(dir);
    if let Some((uid, gid)) = user {
        // std drops root's supplementary groups before it changes the user.
        command.uid(uid).gid(gid);
    }
    command
}

impl Drop for Cluster {
    /// Stops the server by its PID: a fast shutdown (SIGINT, which ends open sessions
    /// too), then SIGKILL if it has not exited within 30 s.
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.server.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if !matches!(self.server.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}
