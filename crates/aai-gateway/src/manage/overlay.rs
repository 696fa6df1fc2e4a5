//! `$AAI_HOME/apps.json`: what `disable`, `enable` and an import's `visibleTo` changed of
//! who sees which app. The gateway owns this file (the user's `config.json` is never
//! written); each scan reads it and adds it to config `clients` (`Visibility::with`).
//!
//! ```json
//! {"clients": {"*": {"apps": {"deny": ["com.example.notes"]},
//!                    "tools": {"deny": ["mcp.github:delete_repo"]}}},
//!  "audience": {"mcp.github": ["claude-code"]}}
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::visibility::Rules;

/// The file's name under `$AAI_HOME`.
pub(crate) const FILE: &str = "apps.json";
/// The largest file read.
const MAX_FILE: u64 = 1024 * 1024;

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Overlay {
    /// Per client name (`"*"`: everyone): the apps and tools hidden from it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub clients: BTreeMap<String, Hidden>,
    /// Per app id: the only clients that see it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub audience: BTreeMap<String, BTreeSet<String>>,
}

/// What one client does not see.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Hidden {
    /// `apps.deny`.
    #[serde(default, skip_serializing_if = "List::is_empty")]
    pub apps: List,
    /// `tools.deny` (`<appId>:<tool>`).
    #[serde(default, skip_serializing_if = "List::is_empty")]
    pub tools: List,
}

/// `{"deny": […]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct List {
    /// The ids (or `<appId>:<tool>`).
    #[serde(default)]
    pub deny: BTreeSet<String>,
}

impl List {
    fn is_empty(&self) -> bool {
        self.deny.is_empty()
    }
}

/// Why the file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// It is not what the gateway writes (edited by hand?): left alone.
    #[error("{path} is not valid ({why}); fix or delete it, nothing was changed")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// The disk refused.
    #[error("cannot write {path}: {why}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        why: std::io::Error,
    },
}

/// The file in `home`.
pub(crate) fn path(home: &Path) -> PathBuf {
    home.join(FILE)
}

/// Reads the overlay in `home` (none: empty).
pub(crate) fn read(home: &Path) -> Result<Overlay, Error> {
    use std::io::Read as _;
    let path = path(home);
    let invalid = |why: String| Error::Invalid {
        path: path.display().to_string(),
        why,
    };
    // The gateway's own file: a regular file of at most 1 MiB, never through a link (a
    // FIFO would never end, a link could name any file).
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Overlay::default()),
        Err(e) => return Err(invalid(e.to_string())),
        Ok(meta) if !meta.is_file() => {
            return Err(invalid("not a regular file".into()));
        }
        Ok(meta) if meta.len() > MAX_FILE => {
            return Err(invalid(format!("{} bytes; at most {MAX_FILE}", meta.len())));
        }
        Ok(_) => {}
    }
    let mut text = String::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_FILE).read_to_string(&mut text))
        .map_err(|e| invalid(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| Error::Invalid {
        path: path.display().to_string(),
        why: e.to_string(),
    })
}

/// Writes `overlay` whole, owner-only.
pub(crate) fn write(home: &Path, overlay: &Overlay) -> Result<(), Error> {
    let path = path(home);
    let text = format!(
        "{}\n",
        serde_json::to_string_pretty(overlay).expect("the overlay is JSON")
    );
    crate::files::private_dir(home)
        .and_then(|()| crate::files::write_private(&path, text.as_bytes()))
        .map_err(|why| Error::Io {
            path: path.display().to_string(),
            why,
        })
}

impl Overlay {
    /// Hides app `app` (or its `tool`) from `client` (`"*"`: everyone); false when it was
    /// hidden already.
    pub(crate) fn hide(&mut self, client: &str, app: &str, tool: Option<&str>) -> bool {
        let hidden = self.clients.entry(client.to_owned()).or_default();
        match tool {
            Some(t) => hidden.tools.deny.insert(format!("{app}:{t}")),
            None => hidden.apps.deny.insert(app.to_owned()),
        }
    }

    /// Undoes [`Overlay::hide`]; false when it was not hidden that way.
    pub(crate) fn show(&mut self, client: &str, app: &str, tool: Option<&str>) -> bool {
        let Some(hidden) = self.clients.get_mut(client) else {
            return false;
        };
        let removed = match tool {
            Some(t) => hidden.tools.deny.remove(&format!("{app}:{t}")),
            None => hidden.apps.deny.remove(app),
        };
        if hidden.apps.is_empty() && hidden.tools.is_empty() {
            self.clients.remove(client);
        }
        removed
    }

    /// The rules per client, in the shape of config `clients`.
    pub(crate) fn rules(&self) -> BTreeMap<String, Rules> {
        self.clients
            .iter()
            .map(|(client, hidden)| {
                let rules = Rules {
                    allow: None,
                    deny: hidden.apps.deny.iter().cloned().collect(),
                    deny_tools: hidden
                        .tools
                        .deny
                        .iter()
                        .filter_map(|t| t.split_once(':'))
                        .map(|(a, t)| (a.to_owned(), t.to_owned()))
                        .collect(),
                };
                (client.clone(), rules)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hiding_and_showing_round_trip_through_the_file() {
        let home = tempfile::tempdir().unwrap();
        let mut o = read(home.path()).unwrap();
        assert!(o.hide("*", "a.b", None));
        assert!(!o.hide("*", "a.b", None));
        assert!(o.hide("claude-code", "a.b", Some("delete")));
        o.audience
            .insert("a.c".into(), BTreeSet::from(["cursor".to_owned()]));
        write(home.path(), &o).unwrap();
        let back = read(home.path()).unwrap();
        assert_eq!(back, o);
        let rules = back.rules();
        assert_eq!(rules["*"].deny, vec!["a.b".to_owned()]);
        assert_eq!(
            rules["claude-code"].deny_tools,
            vec![("a.b".to_owned(), "delete".to_owned())]
        );
        let mut o = back;
        assert!(o.show("claude-code", "a.b", Some("delete")));
        assert!(!o.clients.contains_key("claude-code"));
        assert!(o.show("*", "a.b", None));
        assert!(o.clients.is_empty());
    }

    #[test]
    fn a_file_edited_into_something_else_is_reported_not_replaced() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(path(home.path()), "{\"clients\": 3}").unwrap();
        let e = read(home.path()).unwrap_err();
        assert!(e.to_string().contains("apps.json is not valid"), "{e}");
    }
}
