//! Tool lists that downstream MCP servers returned, kept on disk
//! (`$AAI_HOME/cache/mcp-tools/<hash of the app id>.json`), so that a later run can show an
//! approved server's tools without starting it. Each file names its app and the digest of
//! the command it was listed from (`exec::start`): a list of another command is not used.
//!
//! Files are written whole (a temporary file renamed over the old one) and readable by
//! the owner only; a file that is too large, unreadable or of another app is ignored.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::mcp::downstream::RemoteTool;

/// A list file larger than this is ignored (a 3,000-tool server is about 3 MiB).
const MAX_FILE: u64 = 32 * 1024 * 1024;

/// The file that keeps `app`'s list under `dir`.
fn file(dir: &Path, app: &str) -> PathBuf {
    dir.join(format!("{:016x}.json", crate::hash::stable(app)))
}

/// `app`'s list as listed from the command `pin` names, when one was kept.
pub fn read(dir: &Path, app: &str, pin: &str) -> Option<Vec<RemoteTool>> {
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
    let tools = kept.get("tools")?.as_array()?;
    Some(
        tools
            .iter()
            .filter_map(|t| {
                Some(RemoteTool {
                    name: t.get("name")?.as_str()?.to_owned(),
                    description: t
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    input_schema: t.get("inputSchema")?.clone(),
                    output_schema: t.get("outputSchema").cloned().filter(|v| !v.is_null()),
                })
            })
            .collect(),
    )
}

/// Keeps `tools` as `app`'s list from the command `pin` names.
pub fn write(dir: &Path, app: &str, pin: &str, tools: &[RemoteTool]) -> std::io::Result<()> {
    let body = json!({
        "app": app,
        "pin": pin,
        "listedAt": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        "tools": tools.iter().map(|t| json!({
            "name": t.name,
            "description": t.description,
            "inputSchema": t.input_schema,
            "outputSchema": t.output_schema,
        })).collect::<Vec<_>>(),
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
        let tools = vec![RemoteTool {
            name: "echo".into(),
            description: "Echo".into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
        }];
        write(&dir, "com.a", "pin1", &tools).unwrap();
        let back = read(&dir, "com.a", "pin1").unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].name, "echo");
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
