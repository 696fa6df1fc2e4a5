//! Facts about the machine the gateway runs on, and which bindings can run here.
//!
//! `linux` bindings run on Linux, `macos` ones on macOS, `windows` ones on Windows;
//! `http`, `stdio` and `acp` run anywhere; `intent` needs `adb` and `url-scheme` needs
//! `xcrun` on `PATH` (looked up once, only when such a binding exists).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use aai_descriptor::{Binding, ExecutorKind};

/// Operating systems the gateway knows paths and channels for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// Linux.
    Linux,
    /// macOS.
    Macos,
    /// Windows.
    Windows,
    /// Anything else (only portable bindings run).
    Other,
}

impl Os {
    /// The OS this binary was built for.
    pub const fn current() -> Os {
        if cfg!(target_os = "linux") {
            Os::Linux
        } else if cfg!(target_os = "macos") {
            Os::Macos
        } else if cfg!(windows) {
            Os::Windows
        } else {
            Os::Other
        }
    }
}

impl Os {
    /// Lower-case name, as in descriptors' `platform`.
    pub fn as_str(self) -> &'static str {
        match self {
            Os::Linux => "linux",
            Os::Macos => "macos",
            Os::Windows => "windows",
            Os::Other => "other",
        }
    }
}

/// The running host.
#[derive(Debug)]
pub struct Host {
    os: Os,
    adb: OnceLock<bool>,
    xcrun: OnceLock<bool>,
}

impl Host {
    /// This machine; `AAI_HOST_OS=macos|windows|linux` makes the gateway act as on that
    /// OS (a testing aid: the platform executors then run their programs from `PATH`,
    /// where tests put recording fakes).
    pub fn current() -> Host {
        let os = match std::env::var("AAI_HOST_OS").as_deref() {
            Ok("macos") => Os::Macos,
            Ok("windows") => Os::Windows,
            Ok("linux") => Os::Linux,
            _ => Os::current(),
        };
        Host::new(os)
    }

    /// A host running `os` (tests).
    pub fn new(os: Os) -> Host {
        Host {
            os,
            adb: OnceLock::new(),
            xcrun: OnceLock::new(),
        }
    }

    /// The host OS.
    pub fn os(&self) -> Os {
        self.os
    }

    /// Whether `binding` can be executed on this host.
    pub fn can_run(&self, binding: &Binding) -> bool {
        match binding.executor.kind() {
            ExecutorKind::Applescript | ExecutorKind::Jxa | ExecutorKind::AppleEvents => {
                self.os == Os::Macos
            }
            ExecutorKind::Com => self.os == Os::Windows,
            ExecutorKind::Dbus => self.os == Os::Linux,
            ExecutorKind::Intent => *self.adb.get_or_init(|| on_path("adb").is_some()),
            ExecutorKind::UrlScheme => *self.xcrun.get_or_init(|| on_path("xcrun").is_some()),
            ExecutorKind::Http
            | ExecutorKind::Stdio
            | ExecutorKind::Acp
            | ExecutorKind::Mcp
            | ExecutorKind::Skill
            | ExecutorKind::Gateway => true,
        }
    }
}

/// Finds `program` on `PATH` (with `PATHEXT` extensions on Windows).
pub(crate) fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let exts: Vec<String> = if cfg!(windows) {
        std::env::var("PATHEXT")
            .unwrap_or_else(|_| ".EXE;.CMD;.BAT".to_owned())
            .split(';')
            .map(str::to_owned)
            .collect()
    } else {
        vec![String::new()]
    };
    std::env::split_paths(&path).find_map(|dir| {
        exts.iter()
            .map(|ext| dir.join(format!("{program}{ext}")))
            .find(|p| is_executable(p))
    })
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}
