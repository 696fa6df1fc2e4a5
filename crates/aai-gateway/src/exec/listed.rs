//! Tool lists that downstream MCP servers returned, kept on disk
//! (`$AAI_HOME/cache/mcp-tools/<hash of the app id>.json`), so that a later run can show an
//! approved server's tools without starting it. Each file names its app and the digest of
//! the command it was listed from (`exec::start`): a list of another command is not used.
//!
//! Files are written whole (a temporary file renamed over the old one) and readable by
//! the owner only; a file that is too large, unreadable or of another app is ignored.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// A list file larger than this is ignored (a 3,000-tool server is about 3 MiB).
const MAX_FILE: u64 = 32 * 1024 * 1024;

/// The file that keeps `app`'s list under `dir`.
fn file(dir: &Path, app: &str) -> PathBuf {
    dir.join(format!("{:016x}.json", aai_descriptor::hash::stable(app)))
}

/// `app`'s list as listed from the command `pin` names, when one was kept: each tool as
/// MCP lists it (`name`, `description`, `inputSchema`, `outputSchema`).
pub(crate) fn read(dir: &Path, app: &str, pin: &str) -> Option<Vec<Value>> {
    let path = file(dir, app);
    if std::fs::metadata(&path).ok()?.len() > MAX_FILE {
        tracing::warn!(
            app,
            "the kept tool list {} is too large; ignored",
            path.display()
        );
        return None;
    }
    let kept: Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    if kept.get("app").and_then(Value::as_str) != Some(app)
        || kept.get("pin").and_then(Value::as_str) != Some(pin)
    {
        return None;
    }
    match kept.get("tools")? {
        Value::Array(tools) => Some(tools.clone()),
        _ => None,
    }
}

/// Keeps `tools` (as MCP lists them) as `app`'s list from the command `pin` names.
pub(crate) fn write(dir: &Path, app: &str, pin: &str, tools: &[Value]) -> std::io::Result<()> {
    let body = json!({
        "app": app,
        "pin": pin,
        "listedAt": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        "tools": tools,
    });
    crate::files::private_dir(dir)?;
    crate::files::write_private(&file(dir, app), body.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_read_back_only_for_its_app_and_command() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join("mcp-tools");
        let tools = vec![json!({"name": "echo", "inputSchema": {"type": "object"}})];
        write(&dir, "com.a", "pin1", &tools).unwrap();
        let back = read(&dir, "com.a", "pin1").unwrap();
        assert_eq!(back, tools);
        assert!(read(&dir, "com.a", "pin2").is_none(), "another command");
        assert!(read(&dir, "com.b", "pin1").is_none(), "another app");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir), 0o700);
            assert_eq!(mode(&file(&dir, "com.a")), 0o600);
        }
    }
}
