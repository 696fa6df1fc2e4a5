//! One app's page (`/ui/apps/{id}`), and running one of its tools from it
//! (`/ui/apps/{id}/try`).

use askama::Template;
use axum::extract::{Form, Path, Query, State};
use axum::response::Response;

use super::{Chrome, FlashQuery, Ui, Viewer, forbidden_csrf, not_found, page};

/// One binding of an app.
#[derive(Debug)]
struct BindingRow {
    platform: &'static str,
    kind: &'static str,
    auth: String,
    tools: usize,
    used: bool,
}

/// One tool of an app.
#[derive(Debug)]
struct ToolRow {
    name: String,
    description: String,
    /// What the user changed of it (config `apps.<id>.tools`), next to the app's own
    /// definition; empty when nothing.
    changed: String,
    schema: String,
    /// The "try it" form's fields, one per top-level property of the schema.
    fields: Vec<Field>,
}

/// One field of a tool's "try it" form.
#[derive(Debug)]
struct Field {
    name: String,
    /// `text`, `number`, `integer`, `boolean`, `choice` or `json` (anything else).
    kind: &'static str,
    required: bool,
    description: String,
    /// For `choice`: the allowed values.
    options: Vec<String>,
}

/// The form fields of a tool's parameters schema: strings, numbers and booleans as
/// inputs, an `enum` of strings as a choice, anything else as JSON text.
fn fields_of(schema: &serde_json::Value) -> Vec<Field> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(serde_json::Value::as_array)
        .map(|r| r.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
    else {
        return Vec::new();
    };
    properties
        .iter()
        .take(50)
        .map(|(name, p)| {
            let options: Vec<String> = p
                .get("enum")
                .and_then(serde_json::Value::as_array)
                .map(|e| {
                    e.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let kind = match p.get("type").and_then(serde_json::Value::as_str) {
                _ if !options.is_empty() => "choice",
                Some("string") => "text",
                Some("number") => "number",
                Some("integer") => "integer",
                Some("boolean") => "boolean",
                _ => "json",
            };
            Field {
                name: name.clone(),
                kind,
                required: required.contains(&name.as_str()),
                description: p
                    .get("description")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                options,
            }
        })
        .collect()
}

#[derive(Template)]
#[template(path = "ui/app.html")]
struct AppPage {
    c: Chrome,
    id: String,
    description: String,
    aliases: String,
    version: Option<String>,
    dialect: String,
    source: String,
    bindings: Vec<BindingRow>,
    tools: Vec<ToolRow>,
    diagnostics: Vec<String>,
    /// Description text addressed to the model (`aai_descriptor::lint`), listed tools'
    /// included: where, what, an excerpt.
    poisoning: Vec<String>,
    guide: String,
    /// What config `clients` hides of this app, in words (the effective state).
    hidden: Vec<String>,
    /// `disable` hid it from every client (`$AAI_HOME/apps.json`).
    hidden_for_all: bool,
    /// Its folder is the gateway's to move to the trash.
    removable: bool,
}

pub(in super::super) async fn app(
    State(ui): State<Ui>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<FlashQuery>,
) -> Response {
    let snapshot = viewer.snapshot(&ui).await;
    let Some(entry) = snapshot.find(&id) else {
        return not_found(&ui, &format!("No app `{id}` is served."));
    };
    let app = &entry.app;
    let source = entry.source.display().to_string();
    let manager = ui.pipeline().manager().cloned();
    let removable = manager
        .as_ref()
        .is_some_and(|m| m.remove(&app.id, &entry.source).is_ok());
    let hidden_for_all = manager
        .as_ref()
        .is_some_and(|m| m.hidden_from_everyone(&app.id));
    page(
        AppPage {
            hidden_for_all,
            removable,
            c: Chrome::new(
                &ui,
                snapshot.name(entry),
                format!("/ui/apps/{}", app.id),
                q.flash,
            ),
            id: app.id.clone(),
            description: app.description.clone(),
            aliases: app.aliases.join(", "),
            version: app.version.clone(),
            dialect: format!("{:?}", app.dialect),
            bindings: app
                .bindings
                .iter()
                .enumerate()
                .map(|(i, b)| BindingRow {
                    platform: b.platform.as_str(),
                    kind: b.executor.kind().as_str(),
                    auth: b
                        .auth
                        .as_ref()
                        .map_or("none".to_owned(), |a| a.kind().to_string()),
                    tools: b.tools.len(),
                    used: i == entry.binding,
                })
                .collect(),
            tools: entry
                .binding()
                .tools
                .iter()
                .map(|t| ToolRow {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    changed: crate::overrides::summary(t).unwrap_or_default(),
                    schema: serde_json::to_string_pretty(t.parameters.json()).unwrap_or_default(),
                    fields: fields_of(t.parameters.json()),
                })
                .collect(),
            diagnostics: snapshot
                .diagnostics
                .iter()
                .filter(|d| {
                    d.source == source
                        || (d.source == "config.json"
                            && d.pointer
                                .starts_with(&aai_descriptor::diagnostic::join_pointer(
                                    &aai_descriptor::diagnostic::join_pointer("/apps", &app.id),
                                    "",
                                )))
                })
                .map(ToString::to_string)
                .collect(),
            poisoning: aai_descriptor::lint::text(&app.description)
                .into_iter()
                .map(|f| ("the app".to_owned(), f))
                .chain(entry.binding().tools.iter().flat_map(|t| {
                    aai_descriptor::lint::tool(t)
                        .into_iter()
                        .map(|f| (format!("tool `{}`", t.name), f))
                }))
                .map(|(whose, f)| {
                    format!(
                        "{whose} ({}): {}: \u{201c}{}\u{201d}",
                        if f.pointer.is_empty() {
                            "/description"
                        } else {
                            &f.pointer
                        },
                        f.kind.what(),
                        f.excerpt
                    )
                })
                .collect(),
            guide: crate::registry::guide::render(&snapshot, entry),
            hidden: {
                let tools: Vec<String> = entry
                    .binding()
                    .tools
                    .iter()
                    .map(|t| t.name.clone())
                    .collect();
                let who = |c: &str| {
                    if c == "*" {
                        "every client".to_owned()
                    } else {
                        format!("`{c}`")
                    }
                };
                let visibility = ui.gateway().registry_snapshot().visibility.clone();
                let mut hidden: Vec<String> = visibility
                    .hidden(&app.id, &tools)
                    .map(|(client, tool)| match tool {
                        None => format!("the app is hidden from {}", who(client)),
                        Some(t) => format!("`{t}` is hidden from {}", who(client)),
                    })
                    .collect();
                if let Some(only) = visibility.audience(&app.id) {
                    let names: Vec<String> = only.iter().map(|c| who(c)).collect();
                    hidden.push(format!("only {} see the app", names.join(", ")));
                }
                hidden
            },
            source,
        }
        .render(),
    )
}

/// The result of a tool run from its app page.
#[derive(Template)]
#[template(path = "ui/tried.html")]
struct TriedPage {
    c: Chrome,
    app: String,
    tool: String,
    args: String,
    ok: bool,
    result: String,
}

/// `POST /ui/apps/{id}/try`: runs one tool with the form's arguments through the same
/// pipeline as every front door (validation, consent policy, credentials, history), as
/// the user at the UI (caller `web-ui@ui`, like the command line); in team mode as the
/// admin who is signed in, with their own upstream sign-in.
pub(in super::super) async fn try_tool(
    State(ui): State<Ui>,
    viewer: Viewer,
    Path(id): Path<String>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let value = |key: &str| form.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    if !ui.csrf_ok(value("csrf")) {
        return forbidden_csrf();
    }
    let tool = value("tool").unwrap_or_default().to_owned();
    let back = format!(
        "/ui/apps/{}",
        percent_encoding::utf8_percent_encode(&id, percent_encoding::NON_ALPHANUMERIC)
    );
    let args = match form_args(&form) {
        Ok(args) => args,
        Err(why) => return ui.flash(&back, why, false),
    };
    let origin = crate::pipeline::Origin {
        caller: crate::identity::Caller {
            person: viewer.0.clone(),
            ..crate::identity::Caller::ui()
        },
        prompter: None,
        client: None,
        trace: None,
        within: None,
    };
    let shown = crate::history::mask(&args);
    let outcome = ui
        .pipeline()
        .call(
            &id,
            &tool,
            Some(args),
            tokio_util::sync::CancellationToken::new(),
            None,
            &origin,
        )
        .await;
    let (ok, result) = match outcome {
        // The user's own result, as the app gave it (cut at 100,000 characters).
        Ok(o) => (
            true,
            crate::text::excerpt(
                &serde_json::to_string_pretty(&o.value).unwrap_or_default(),
                100_000,
            ),
        ),
        Err(e) => (
            false,
            serde_json::to_string_pretty(&e.to_json()).unwrap_or_default(),
        ),
    };
    page(
        TriedPage {
            c: Chrome::new(&ui, format!("{id}: {tool}"), back.clone(), None),
            app: id,
            tool,
            args: serde_json::to_string_pretty(&shown).unwrap_or_default(),
            ok,
            result,
        }
        .render(),
    )
}

/// The arguments of a "try it" form: `arg.<name>` fields typed by `type.<name>`, empty
/// ones left out; a non-empty `json` field (an object) is taken whole instead.
fn form_args(form: &[(String, String)]) -> Result<serde_json::Value, String> {
    use serde_json::Value;
    if let Some((_, text)) = form
        .iter()
        .find(|(k, v)| k == "json" && !v.trim().is_empty())
    {
        return match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) => Err("The arguments must be a JSON object.".to_owned()),
            Err(e) => Err(format!("The arguments are not JSON: {e}")),
        };
    }
    let kind = |name: &str| {
        form.iter()
            .find(|(k, _)| k.strip_prefix("type.") == Some(name))
            .map_or("text", |(_, v)| v.as_str())
    };
    let mut args = serde_json::Map::new();
    for (key, text) in form {
        let Some(name) = key.strip_prefix("arg.") else {
            continue;
        };
        if text.is_empty() {
            continue;
        }
        let value = match kind(name) {
            "integer" => text
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("`{name}` must be a whole number."))?,
            "number" => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("`{name}` must be a number."))?,
            "boolean" => Value::Bool(text == "true"),
            "json" => {
                serde_json::from_str(text).map_err(|e| format!("`{name}` is not JSON: {e}"))?
            }
            _ => Value::String(text.clone()),
        };
        args.insert(name.to_owned(), value);
    }
    Ok(Value::Object(args))
}
