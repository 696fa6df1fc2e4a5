//! Managing the user's apps (`docs/manage.md`): import, remove (to the trash) and restore,
//! hide (disable) and show (enable) an app or one tool for one client or for everyone.
//! The agent reaches it as the gateway's own app `aai` (through the pipeline, so consent,
//! per-client views and history apply as to any app); the CLI's `apps` commands and the
//! web UI call the same functions.
//!
//! Every change is planned first ([`Manager::plan`]: reads, fetches a URL it was given,
//! writes nothing, runs nothing) and described in one text ([`Change::describe`]) — what
//! will be written, moved or hidden and what its first use will run —, which is what the
//! user approves; [`Manager::apply`] then does exactly that.

pub(crate) mod import;
pub(crate) mod overlay;
pub(crate) mod trash;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::{Code, GatewayError};
use crate::registry::Snapshot;

/// The gateway's own app id.
pub(crate) const APP_ID: &str = crate::catalog::builtin::GATEWAY_ID;

/// The client name that means everyone.
pub(crate) const EVERYONE: &str = "*";

/// Why a management call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The arguments do not say what to do.
    #[error("{0}")]
    Args(String),
    /// A URL could not be fetched.
    #[error("{0}")]
    Fetch(String),
    /// What the source became does not validate.
    #[error("the imported descriptor does not validate: {0}")]
    Invalid(String),
    /// Something is in the way (an app the user wrote, an installed skill).
    #[error("{0}")]
    Exists(String),
    /// The caller sees no app of that id.
    #[error("no app `{0}`")]
    Unknown(String),
    /// The app is not one the gateway may remove.
    #[error("{0}")]
    NotRemovable(String),
    /// `apps.json`.
    #[error(transparent)]
    Overlay(#[from] overlay::Error),
    /// The trash.
    #[error(transparent)]
    Trash(#[from] trash::Error),
    /// Writing an import.
    #[error("cannot write {path}: {why}")]
    Write {
        /// What.
        path: String,
        /// Why.
        why: std::io::Error,
    },
    /// Storing an import's credential.
    #[error("its credential could not be stored: {0}")]
    Store(String),
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match &e {
            Error::Args(_) | Error::Exists(_) => Code::InvalidParams,
            Error::Fetch(_) => Code::ServiceUnavailable,
            Error::Invalid(_) => Code::AaiJsonInvalid,
            Error::Unknown(_) => Code::AppNotFound,
            Error::NotRemovable(_) => Code::PermissionDenied,
            Error::Trash(trash::Error::NotTrashed(_)) => Code::NotFound,
            Error::Trash(trash::Error::Taken(_)) => Code::InvalidParams,
            Error::Overlay(_) | Error::Trash(_) | Error::Write { .. } | Error::Store(_) => {
                Code::AutomationFailed
            }
        };
        GatewayError::new(code, e.to_string())
    }
}

/// The client `client` as the target of its own change ("for me"): a client whose name is
/// `*` would otherwise change what every client sees.
fn me(client: &str) -> Result<&str, Error> {
    if client == EVERYONE {
        return Err(Error::Args(
            "a client named `*` cannot change what it sees by itself: `*` stands for every client (use `for: \"everyone\"` on an app you see)".into(),
        ));
    }
    Ok(client)
}

/// A change, planned and not done yet.
#[derive(Debug)]
pub struct Change {
    what: What,
    text: String,
}

#[derive(Debug)]
enum What {
    Import {
        drafts: Vec<import::Draft>,
        audience: Option<BTreeSet<String>>,
    },
    Remove {
        app: String,
        folder: PathBuf,
    },
    Restore {
        app: String,
    },
    Visibility {
        hide: bool,
        client: String,
        app: String,
        tool: Option<String>,
    },
}

impl Change {
    /// What it will do, in full: what the user approves.
    pub fn describe(&self) -> &str {
        &self.text
    }

    /// What the imported apps start on first use, as the user approved it (app id, start).
    pub fn starts(&self) -> Vec<(&str, &crate::exec::start::Start)> {
        match &self.what {
            What::Import { drafts, .. } => drafts
                .iter()
                .flat_map(|d| d.starts.iter().map(|s| (d.id.as_str(), s)))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// What a management call comes to: a preview (written nothing), or a change to approve.
#[derive(Debug)]
pub enum Step {
    /// The answer, nothing changed.
    Preview(Value),
    /// A change to ask about, then apply.
    Change(Change),
}

/// The management side of one gateway home.
#[derive(Debug, Clone)]
pub struct Manager {
    home: PathBuf,
    platform: &'static str,
}

impl Manager {
    /// For the home `home` on a host of `platform` (`linux`, `macos`, `windows`).
    pub fn new(home: PathBuf, platform: &'static str) -> Manager {
        Manager { home, platform }
    }

    /// The home.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Plans `tool` of the app `aai` with `args` for the client `client`, which sees
    /// `snapshot` of all the apps, `all`.
    pub async fn plan(
        &self,
        tool: &str,
        args: &Value,
        client: &str,
        snapshot: &Snapshot,
        all: &Snapshot,
    ) -> Result<Step, Error> {
        let text = |k: &str| args.get(k).and_then(Value::as_str);
        match tool {
            "import" => self.plan_import(args, client, snapshot, all).await,
            "remove" => {
                let app = text("app").unwrap_or_default();
                let entry = snapshot
                    .find(app)
                    .ok_or_else(|| Error::Unknown(app.to_owned()))?;
                self.remove(&entry.app.id, &entry.source).map(Step::Change)
            }
            "restore" => {
                let app = text("app").unwrap_or_default();
                self.restore(app).map(Step::Change)
            }
            "enable" | "disable" => {
                let hide = tool == "disable";
                let app = text("app").unwrap_or_default();
                let for_all = text("for") == Some("everyone");
                let target = if for_all { EVERYONE } else { me(client)? };
                // Hiding, and anything for everyone, needs an app the caller sees; showing
                // again what the caller hid from itself cannot.
                let app = if hide || for_all {
                    let entry = snapshot
                        .find(app)
                        .ok_or_else(|| Error::Unknown(app.to_owned()))?;
                    if let Some(t) = text("tool")
                        && entry.binding().tool(t).is_none()
                    {
                        return Err(Error::Args(format!("`{}` has no tool `{t}`", entry.app.id)));
                    }
                    entry.app.id.clone()
                } else {
                    app.to_owned()
                };
                self.visibility(hide, target, &app, text("tool"))
                    .map(Step::Change)
            }
            other => Err(Error::Args(format!("the gateway has no tool `{other}`"))),
        }
    }

    async fn plan_import(
        &self,
        args: &Value,
        client: &str,
        snapshot: &Snapshot,
        all: &Snapshot,
    ) -> Result<Step, Error> {
        let text = |k: &str| args.get(k).and_then(Value::as_str);
        let request = import::Request {
            source: args.get("source").unwrap_or(&Value::Null),
            kind: text("kind"),
            name: text("name"),
            summary: text("summary"),
        };
        // An app the caller may not see is neither replaced nor described through it.
        let hidden = |id: &str| {
            (all.find(id).is_some() || all.missing(id).is_some()) && snapshot.find(id).is_none()
        };
        let mut drafts = import::drafts(&self.home, self.platform, &request, &hidden).await?;
        for d in &mut drafts {
            if let Some(entry) = snapshot.find(&d.id)
                && !entry.source.starts_with(&d.folder)
            {
                d.notes.push(format!(
                    "an app `{}` is served from {} now; the import takes its place",
                    d.id,
                    entry.source.display()
                ));
            }
        }
        let audience = args
            .get("visibleTo")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|n| if n == "me" { me(client) } else { Ok(n) })
                    .map(|n| n.map(str::to_owned))
                    .collect::<Result<BTreeSet<_>, Error>>()
            })
            .transpose()?;
        if args.get("confirm").and_then(Value::as_bool) != Some(true) {
            let apps: Vec<Value> = drafts.iter().map(import::Draft::preview).collect();
            return Ok(Step::Preview(json!({
                "preview": true,
                "apps": apps,
                "written": [],
                "next": "Nothing was written. To import, call again with the same arguments and `confirm: true` (and optionally `summary`, `visibleTo`); the user is asked first.",
            })));
        }
        let mut text = String::from("import ");
        text.push_str(&crate::text::count(drafts.len(), "app", "apps"));
        for d in &drafts {
            text.push_str(&format!(
                "; `{}` ({}): {} {}",
                d.id,
                d.kind.as_str(),
                if d.replaces { "rewrites" } else { "writes" },
                d.folder.display()
            ));
            if !d.secrets.is_empty() {
                text.push_str(&format!(
                    " and stores the credentials {} in the credential store",
                    d.secret_names().join(", ")
                ));
            }
            // Everything a yes lets its calls run, read or reach, for every binding.
            if !d.reach.is_empty() {
                text.push_str(&format!("; its calls may {}", d.reach.join(", and ")));
            }
        }
        if let Some(audience) = &audience {
            let names: Vec<&str> = audience.iter().map(String::as_str).collect();
            text.push_str(&format!("; only {} will see it", names.join(", ")));
        }
        Ok(Step::Change(Change {
            what: What::Import { drafts, audience },
            text,
        }))
    }

    /// Plans moving app `app`, defined by the file `source`, to the trash: only apps the
    /// gateway's home holds (descriptors, skills and web apps it wrote) can be removed.
    pub fn remove(&self, app: &str, source: &Path) -> Result<Change, Error> {
        if app == APP_ID {
            return Err(Error::NotRemovable(
                "the gateway's own app cannot be removed; hide it with config `clients` instead"
                    .into(),
            ));
        }
        let folder = source.parent().unwrap_or(source);
        let home = std::fs::canonicalize(&self.home).unwrap_or_else(|_| self.home.clone());
        let within = std::fs::canonicalize(folder)
            .ok()
            .and_then(|f| f.parent().map(Path::to_path_buf))
            .is_some_and(|parent| {
                parent == home || parent == home.join("skills") || parent == home.join("web")
            });
        if !within {
            return Err(Error::NotRemovable(format!(
                "`{app}` comes from {}, which the gateway does not manage (a scan path, a system folder or a built-in); hide it with `disable` instead",
                source.display()
            )));
        }
        let text = format!(
            "remove `{app}`: moves {} to {} (undo: `aai-gateway apps restore {app}`)",
            folder.display(),
            self.home.join(trash::FOLDER).display()
        );
        Ok(Change {
            what: What::Remove {
                app: app.to_owned(),
                folder: folder.to_owned(),
            },
            text,
        })
    }

    /// Plans putting the latest removal of `app` back.
    pub fn restore(&self, app: &str) -> Result<Change, Error> {
        let trashed = trash::list(&self.home)
            .into_iter()
            .find(|t| t.app == app)
            .ok_or_else(|| trash::Error::NotTrashed(app.to_owned()))?;
        let text = format!(
            "restore `{app}`: moves {} back to {}",
            trashed.path.display(),
            trashed.origin.display()
        );
        Ok(Change {
            what: What::Restore {
                app: app.to_owned(),
            },
            text,
        })
    }

    /// Whether `disable` hid app `app` from every client.
    pub fn hidden_from_everyone(&self, app: &str) -> bool {
        overlay::read(&self.home).is_ok_and(|o| {
            o.clients
                .get(EVERYONE)
                .is_some_and(|h| h.apps.deny.contains(app))
        })
    }

    /// Plans hiding (or showing again) app `app`, or its `tool`, for `client` (`"*"`:
    /// everyone).
    pub fn visibility(
        &self,
        hide: bool,
        client: &str,
        app: &str,
        tool: Option<&str>,
    ) -> Result<Change, Error> {
        if app.is_empty() {
            return Err(Error::Args("`app` is required".into()));
        }
        let overlay = overlay::read(&self.home)?;
        let mut after = overlay.clone();
        let changes = if hide {
            after.hide(client, app, tool)
        } else {
            after.show(client, app, tool)
        };
        let what = match tool {
            Some(t) => format!("tool `{t}` of `{app}`"),
            None => format!("`{app}`"),
        };
        let whom = if client == EVERYONE {
            "every client".to_owned()
        } else {
            format!("the client `{client}`")
        };
        if !changes {
            return Err(Error::Args(if hide {
                format!("{what} is hidden from {whom} already")
            } else {
                format!(
                    "{what} is not hidden from {whom} by `disable` (config `clients` in config.json is the user's to edit)"
                )
            }));
        }
        let verb = if hide { "hide" } else { "show again" };
        let text = format!(
            "{verb} {what} for {whom}: writes {}",
            overlay::path(&self.home).display()
        );
        Ok(Change {
            what: What::Visibility {
                hide,
                client: client.to_owned(),
                app: app.to_owned(),
                tool: tool.map(str::to_owned),
            },
            text,
        })
    }

    /// Does `change`; `store` keeps an import's credentials.
    pub async fn apply(
        &self,
        change: Change,
        store: &crate::auth::store::Store,
    ) -> Result<Value, Error> {
        match change.what {
            What::Import { drafts, audience } => {
                let mut written = Vec::new();
                for d in drafts.iter() {
                    for (key, value) in &d.secrets {
                        let credential = crate::auth::store::Credential::parse(
                            aai_descriptor::AuthKind::ApiKey,
                            value,
                        )
                        .map_err(|e| Error::Store(e.to_string()))?;
                        store
                            .set(key, credential)
                            .await
                            .map_err(|e| Error::Store(GatewayError::from(e).explain()))?;
                    }
                    let draft = d.clone();
                    tokio::task::spawn_blocking(move || write(&draft))
                        .await
                        .map_err(|e| Error::Write {
                            path: d.folder.display().to_string(),
                            why: std::io::Error::other(e.to_string()),
                        })??;
                    written.push(json!({"app": d.id, "folder": d.folder}));
                }
                if let Some(audience) = audience {
                    let mut overlay = overlay::read(&self.home)?;
                    for d in &drafts {
                        overlay.audience.insert(d.id.clone(), audience.clone());
                    }
                    overlay::write(&self.home, &overlay)?;
                }
                Ok(json!({"imported": written}))
            }
            What::Remove { app, folder } => {
                // What `disable` hid of it stays hidden (a rule about an app that is gone
                // does nothing): a restore brings it back as the user left it.
                let went = trash::put(&self.home, &app, &folder)?;
                Ok(json!({"removed": app, "trash": went,
                          "undo": format!("aai-gateway apps restore {app}")}))
            }
            What::Restore { app } => {
                let back = trash::restore(&self.home, &app)?;
                Ok(json!({"restored": app, "folder": back}))
            }
            What::Visibility {
                hide,
                client,
                app,
                tool,
            } => {
                let mut overlay = overlay::read(&self.home)?;
                if hide {
                    overlay.hide(&client, &app, tool.as_deref());
                } else {
                    overlay.show(&client, &app, tool.as_deref());
                }
                overlay::write(&self.home, &overlay)?;
                Ok(json!({
                    if hide { "hidden" } else { "shown" }: {"app": app, "tool": tool, "client": client}
                }))
            }
        }
    }
}

/// Writes one draft: a descriptor with its fingerprint (as the CLI's `import` does), or a
/// skill.
fn write(d: &import::Draft) -> Result<(), Error> {
    let failed = |why| Error::Write {
        path: d.folder.display().to_string(),
        why,
    };
    match &d.payload {
        import::Payload::Descriptor(text) => {
            // Looked at again: the user may have edited it while they were asked.
            import::ours(&d.folder, &d.id)?;
            write_descriptor(&d.folder, text)
                .map(|_| ())
                .map_err(failed)
        }
        import::Payload::SkillFile(text) => {
            let parent = d.folder.parent().unwrap_or(&d.folder);
            crate::files::private_dir(parent)
                // Taken whole or not at all: two imports of one name cannot mix.
                .and_then(|()| std::fs::create_dir(&d.folder))
                .and_then(|()| {
                    crate::files::write_private(&d.folder.join("SKILL.md"), text.as_bytes())
                })
                .map_err(failed)
        }
        import::Payload::SkillFolder(from) => import::copy_skill(from, &d.folder).map_err(failed),
    }
}

/// Writes `text` to `dir/aai.json` with its fingerprint (`.generated`), so that a later
/// import or `--discover` knows the file is the gateway's until the user edits it.
pub(crate) fn write_descriptor(dir: &Path, text: &str) -> std::io::Result<PathBuf> {
    crate::files::private_dir(dir)?;
    let file = dir.join("aai.json");
    crate::files::write_private(&file, text.as_bytes())?;
    crate::files::write_private(
        &dir.join(".generated"),
        format!("{}\n", aai_author::plan::fingerprint(text)).as_bytes(),
    )?;
    Ok(file)
}
