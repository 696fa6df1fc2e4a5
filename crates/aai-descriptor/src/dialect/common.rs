//! Checks and readers shared by all dialects: ids, tool basics, timeouts, URLs,
//! placeholders, D-Bus names.

use std::time::Duration;

use serde_json::Value;

use crate::diagnostic::Sink;
use crate::read::Obj;
use crate::schema::Schema;

/// The parts every tool has, whatever its executor.
#[derive(Debug)]
pub(crate) struct ToolBase<'a> {
    pub name: String,
    pub description: String,
    pub parameters: Schema,
    /// The parameters schema as written, for load-time checks (placeholders, paths).
    pub params_json: &'a Value,
    pub returns: Option<Schema>,
    /// `readOnly`: the tool only reads.
    pub read_only: bool,
    /// `undo`: the tool that undoes a call.
    pub undo: Option<crate::undo::Undo>,
}

/// Reads and checks an app id.
pub(crate) fn app_id(obj: &mut Obj<'_>, key: &'static str) -> Option<String> {
    let id = obj.req_text(key)?;
    let at = obj.at(key);
    if !check_app_id(obj.sink(), &at, id, "app id") {
        return None;
    }
    if !id.contains('.') || id.starts_with('.') || id.ends_with('.') || id.contains("..") {
        obj.sink().warning(
            at,
            format!("app id `{id}` is not in reverse-DNS form (e.g. `com.example.app`)"),
        );
    }
    Some(id.to_owned())
}

/// Reports why `id` cannot be an app id (it becomes a folder name and a URI), if it
/// cannot; `what` names it in the message (`app id`, `app id `x` (the folder's name)`).
pub(crate) fn check_app_id(sink: &Sink, at: &str, id: &str, what: &str) -> bool {
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
    {
        sink.error(
            at,
            format!("{what} `{id}` contains `{bad}`; use letters, digits, `.`, `-` and `_` (reverse-DNS, e.g. `com.example.app`)"),
        );
        return false;
    }
    if id.chars().all(|c| c == '.') {
        // `.` and `..` would name a folder's parent when the id becomes a folder name.
        sink.error(at, format!("{what} `{id}` is only dots"));
        return false;
    }
    true
}

/// Reads `name`, `description`, `parameters` and `returns` of a tool.
pub(crate) fn tool_base<'a>(tool: &mut Obj<'a>) -> Option<ToolBase<'a>> {
    let name = tool.req_text("name");
    if let Some(name) = name {
        check_tool_name(tool, name);
    }
    let description = match tool.opt_str("description") {
        Some(d) => d.to_owned(),
        None => {
            if !tool.has("description") {
                tool.sink().warning(
                    tool.pointer().to_owned(),
                    "tool has no `description`; agents will see only its name",
                );
            }
            String::new()
        }
    };
    let params_json = tool.req("parameters");
    let parameters = params_json.and_then(|v| schema(tool.sink(), v, tool.at("parameters"), true));
    let returns = tool
        .get("returns")
        .and_then(|v| schema(tool.sink(), v, tool.at("returns"), false));
    let returns_ok = returns.is_some() || !tool.has("returns");
    let read_only = tool.opt_bool("readOnly").unwrap_or(false);
    let undo = crate::undo::read(tool);
    if read_only && undo.is_some() {
        tool.sink().warning(
            tool.at("undo"),
            "the tool is `readOnly`: it changes nothing, so its `undo` never runs",
        );
    }
    Some(ToolBase {
        name: name?.to_owned(),
        description,
        parameters: parameters?,
        params_json: params_json?,
        returns: if returns_ok { returns } else { return None },
        read_only,
        undo,
    })
}

/// Whether `name` is a tool name every MCP client takes: 1-64 letters, digits, `_`, `-`
/// and `.` (a descriptor's other names are a warning; the gateway's overrides require it).
pub fn portable_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn check_tool_name(tool: &Obj<'_>, name: &str) {
    let at = tool.at("name");
    if name.chars().any(char::is_control) {
        tool.sink()
            .error(at, "tool name must not contain control characters");
    } else if name == "*" || name.starts_with('@') {
        // `*` stands for every tool of an app in consent grants, `@…` for what the
        // gateway itself asks about (starting an app): a tool may not take those names.
        tool.sink().error(
            at,
            format!("tool name `{name}` is reserved (`*` and names starting with `@` mean something else to consent)"),
        );
    } else if !portable_tool_name(name) {
        tool.sink().warning(
            at,
            format!("tool name `{name}` should be 1-64 characters of letters, digits, `_`, `-` and `.`; some MCP clients reject other names"),
        );
    }
}

/// Compiles a schema value; `parameters` must describe an object.
fn schema(sink: &Sink, value: &Value, at: String, parameters: bool) -> Option<Schema> {
    let Some(map) = value.as_object() else {
        sink.error(
            at,
            format!(
                "expected a JSON Schema object, found {}",
                crate::read::type_name(value)
            ),
        );
        return None;
    };
    if parameters
        && let Some(ty) = map.get("type")
        && ty.as_str() != Some("object")
    {
        sink.error(
            format!("{at}/type"),
            format!("tool parameters must be `\"type\": \"object\"`, found {ty}"),
        );
        return None;
    }
    match Schema::load(value) {
        Ok(s) => Some(s),
        Err(e) => {
            sink.error(at, format!("invalid JSON Schema (draft-07): {e}"));
            None
        }
    }
}

/// Reports tools that share a name.
pub(crate) fn check_unique_names<'n>(
    sink: &Sink,
    tools_pointer: &str,
    names: impl IntoIterator<Item = (usize, &'n str)>,
) {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (index, name) in names {
        match seen.entry(name) {
            std::collections::hash_map::Entry::Occupied(first) => sink.error(
                format!("{tools_pointer}/{index}/name"),
                format!(
                    "duplicate tool name `{name}` (first defined at {tools_pointer}/{})",
                    first.get()
                ),
            ),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(index);
            }
        }
    }
}

/// The unit a dialect writes timeouts in.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Unit {
    Seconds,
    Millis,
}

/// Reads an optional positive timeout.
pub(crate) fn timeout(obj: &mut Obj<'_>, key: &'static str, unit: Unit) -> Option<Duration> {
    let n = obj.opt_non_negative(key)?;
    if n == 0.0 {
        obj.sink()
            .error(obj.at(key), format!("`{key}` must be greater than zero"));
        return None;
    }
    let secs = match unit {
        Unit::Seconds => n,
        Unit::Millis => n / 1000.0,
    };
    // Longer than a day is a mistake (and a huge number cannot be a `Duration` at all).
    if !secs.is_finite() || secs > MAX_TIMEOUT_SECS {
        let limit = match unit {
            Unit::Seconds => format!("{MAX_TIMEOUT_SECS} seconds"),
            Unit::Millis => format!("{} milliseconds", MAX_TIMEOUT_SECS * 1000.0),
        };
        obj.sink().error(
            obj.at(key),
            format!("`{key}` must be at most {limit} (a day)"),
        );
        return None;
    }
    Some(Duration::from_secs_f64(secs))
}

/// The longest timeout a descriptor may set, in seconds.
pub(crate) const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// Folds an enum-like word so `apple-events`, `apple_events` and `appleEvents` compare equal.
pub(crate) fn fold(word: &str) -> String {
    word.chars()
        .filter(|c| *c != '_' && *c != '-' && *c != ' ')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Checks that `url` is absolute http(s) with no user name or password; `https` is
/// required unless the host is loopback. The URL is read by the `url` crate — the WHATWG
/// parser the HTTP client uses — so the check and the request can never disagree about
/// the host (`http://example.com\@127.0.0.1/` is `example.com` to both).
pub(crate) fn check_url(sink: &Sink, at: &str, url: &str) -> bool {
    let parsed = match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => u,
        Ok(_) | Err(url::ParseError::RelativeUrlWithoutBase) => {
            sink.error(at, format!("`{url}` is not an absolute http(s) URL"));
            return false;
        }
        Err(url::ParseError::EmptyHost) => {
            sink.error(at, format!("`{url}` has no host"));
            return false;
        }
        Err(e) => {
            sink.error(at, format!("`{url}` is not a valid URL: {e}"));
            return false;
        }
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        sink.error(
            at,
            "the URL must not carry a user name or password (credentials belong in the credential store)",
        );
        return false;
    }
    let loopback = match parsed.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => {
            sink.error(at, format!("`{url}` has no host"));
            return false;
        }
    };
    if parsed.scheme() == "http" && !loopback {
        sink.error(
            at,
            format!("`{url}` must use https (plain http is allowed only for loopback hosts)"),
        );
        return false;
    }
    true
}

/// The first dot segment (`.` or `..`, also percent-encoded as `%2e`) of a URL's path as
/// written: URL parsing resolves them away, so a `baseUrl` or `path` with one would
/// silently reach another path than the one written (and every call would fail, blaming
/// its arguments).
pub fn dot_segment(url_or_path: &str) -> Option<&str> {
    let after_scheme = url_or_path
        .split_once("://")
        .map_or(url_or_path, |(_, rest)| {
            rest.find('/').map_or("", |at| &rest[at..])
        });
    let path = after_scheme.split(['?', '#']).next().unwrap_or("");
    path.split(['/', '\\']).find(|segment| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    })
}

/// Whether a name (of an environment variable, a header, a field) looks like it holds a
/// secret.
pub fn looks_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "key",
        "token",
        "secret",
        "pass",
        "pwd",
        "auth",
        "bearer",
        "cookie",
        "credential",
        "session",
        "private",
        "jwt",
        "dsn",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// Whether a value looks like a secret whatever its name: a well-known token shape (GitHub,
/// GitLab, Slack, OpenAI-style `sk-`, Stripe, AWS access keys, Google API keys and OAuth
/// tokens, JWTs), a URL with a password, or a connection string with a password.
pub fn looks_secret_value(value: &str) -> bool {
    let v = value.trim();
    const PREFIXES: [&str; 19] = [
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "glpat-",
        "sk-",
        "sk_live_",
        "sk_test_",
        "rk_live_",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "xoxs-",
        "AKIA",
        "ASIA",
        "AIza",
        "ya29.",
    ];
    let token_like = v.len() >= 16 && !v.contains(char::is_whitespace);
    if token_like && PREFIXES.iter().any(|p| v.starts_with(p)) {
        return true;
    }
    // A JWT: three base64url parts, the first a JSON object.
    if token_like && v.starts_with("eyJ") && v.matches('.').count() == 2 {
        return true;
    }
    // `scheme://user:password@host`.
    if let Some((_, rest)) = v.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && userinfo.contains(':')
        {
            return true;
        }
    }
    let lower = v.to_ascii_lowercase();
    ["password=", "pwd=", "passwd="]
        .iter()
        .any(|k| lower.contains(k))
}

/// A `${NAME}` placeholder name for an `env` or header name: letters, digits and `_`,
/// upper case, not starting with a digit (`X-Api-Key` → `X_API_KEY`).
pub fn placeholder_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

/// The names of the `${NAME}` placeholders of `text` (letters, digits and `_`, not
/// starting with a digit), in order, repeats included; anything else is literal.
pub fn placeholder_names(text: &str) -> impl Iterator<Item = &str> {
    text.split("${").skip(1).filter_map(|rest| {
        let name = &rest[..rest.find('}')?];
        let mut chars = name.chars();
        let ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        ok.then_some(name)
    })
}

/// The `${name}` placeholders of a template, in order.
pub(crate) fn placeholders(template: &str) -> impl Iterator<Item = &str> {
    template.split("${").skip(1).filter_map(|rest| {
        let end = rest.find('}')?;
        Some(&rest[..end])
    })
}

/// Whether `name` is a top-level property of the schema `params`.
pub(crate) fn has_property(params: &Value, name: &str) -> bool {
    params
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key(name))
}

/// Warns about `${name}` placeholders that are not parameters.
pub(crate) fn check_placeholders(sink: &Sink, at: &str, template: &str, params: &Value) {
    for name in placeholders(template) {
        if !has_property(params, name) {
            sink.warning(
                at,
                format!("placeholder `${{{name}}}` is not a parameter; it will be left empty"),
            );
        }
    }
}

/// Same as [`check_placeholders`] for every string inside a JSON value.
pub(crate) fn check_value_placeholders(sink: &Sink, at: &str, value: &Value, params: &Value) {
    match value {
        Value::String(s) => check_placeholders(sink, at, s, params),
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                check_value_placeholders(sink, &format!("{at}/{i}"), v, params);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                check_value_placeholders(sink, &crate::diagnostic::join_pointer(at, k), v, params);
            }
        }
        _ => {}
    }
}

/// D-Bus name kinds, for syntax checks.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DbusName {
    Bus,
    Interface,
    Member,
    Path,
}

/// Checks D-Bus name syntax (per the D-Bus specification).
pub(crate) fn check_dbus_name(sink: &Sink, at: &str, kind: DbusName, name: &str) -> bool {
    let element = |e: &str, dash: bool| {
        !e.is_empty()
            && !e.starts_with(|c: char| c.is_ascii_digit())
            && e.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || (dash && c == '-'))
    };
    let (ok, what) = match kind {
        DbusName::Bus => (
            name.len() <= 255
                && name.split('.').count() >= 2
                && name.split('.').all(|e| element(e, true)),
            "a bus name like `org.example.App`",
        ),
        DbusName::Interface => (
            name.len() <= 255
                && name.split('.').count() >= 2
                && name.split('.').all(|e| element(e, false)),
            "an interface name like `org.example.App`",
        ),
        DbusName::Member => (
            name.len() <= 255 && element(name, false),
            "a member name like `SendEmail`",
        ),
        DbusName::Path => (
            name == "/"
                || (name.starts_with('/')
                    && name[1..].split('/').all(|e| {
                        !e.is_empty() && e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    })),
            "an object path like `/org/example/App`",
        ),
    };
    if !ok {
        sink.error(at, format!("`{name}` is not {what}"));
    }
    ok
}

/// The object path the JSON convention derives from an app id: `/` + id with `.` → `/`
/// (and characters not allowed in paths → `_`).
pub(crate) fn path_from_id(id: &str) -> String {
    let mut path = String::with_capacity(id.len() + 1);
    for element in id.split('.').filter(|e| !e.is_empty()) {
        path.push('/');
        path.extend(
            element
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
        );
    }
    if path.is_empty() {
        path.push('/');
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_bounded() {
        let value = serde_json::json!({"a": 30, "b": 1.5e300, "c": 86_400_001, "d": 0.5});
        let sink = Sink::new("t");
        let mut obj = crate::read::Obj::new(&sink, &value, String::new()).unwrap();
        assert_eq!(
            timeout(&mut obj, "a", Unit::Seconds),
            Some(Duration::from_secs(30))
        );
        assert_eq!(timeout(&mut obj, "b", Unit::Seconds), None);
        assert_eq!(timeout(&mut obj, "c", Unit::Millis), None);
        assert_eq!(
            timeout(&mut obj, "d", Unit::Millis),
            Some(Duration::from_micros(500))
        );
        drop(obj);
        let errors: Vec<String> = sink.into_vec().iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].contains("at most 86400 seconds"), "{errors:?}");
    }

    #[test]
    fn urls_need_https_except_loopback() {
        let sink = Sink::new("t");
        assert!(check_url(&sink, "", "https://api.example.com/v1"));
        assert!(check_url(&sink, "", "http://127.0.0.1:8080"));
        assert!(check_url(&sink, "", "http://[::1]:80/x"));
        assert!(check_url(&sink, "", "http://localhost"));
        assert!(!check_url(&sink, "", "http://api.example.com"));
        assert!(!check_url(&sink, "", "ftp://x"));
        // What the HTTP client would really contact decides.
        assert!(!check_url(&sink, "", "http://example.com\\@127.0.0.1/api"));
        assert!(!check_url(&sink, "", "http://127.0.0.1.example.com/api"));
        assert!(!check_url(&sink, "", "http://0.0.0.0:80/"));
        assert!(!check_url(&sink, "", "http://[::ffff:127.0.0.1]:80/"));
        assert!(!check_url(&sink, "", "https://bob:pw@api.example.com/"));
        assert!(
            check_url(&sink, "", "http://127.1:8080/x"),
            "127.1 is 127.0.0.1"
        );
        assert!(!check_url(&sink, "", "/relative"));
        for dotted in [
            "https://api.example.com/v1/../admin",
            "/../admin",
            "/a/./b",
            "/a/%2e%2E/b",
            "/a/%2E/b",
            "/a/..",
            "https://h/..?x=1",
        ] {
            assert!(dot_segment(dotted).is_some(), "{dotted}");
        }
        for clean in [
            "https://api.example.com/v1/",
            "/a/b.c/..d/{id}",
            "/a?b=..",
            "/.well/x",
            "https://h",
        ] {
            assert_eq!(dot_segment(clean), None, "{clean}");
        }
        assert!(!check_url(&sink, "", "https://"));
        // One diagnostic per refused URL.
        assert_eq!(sink.into_vec().len(), 9);
    }

    #[test]
    fn dbus_names() {
        let sink = Sink::new("t");
        assert!(check_dbus_name(
            &sink,
            "",
            DbusName::Bus,
            "org.mpris.MediaPlayer2.mpv"
        ));
        assert!(check_dbus_name(&sink, "", DbusName::Bus, "com.my-app.x"));
        assert!(!check_dbus_name(
            &sink,
            "",
            DbusName::Interface,
            "com.my-app.x"
        ));
        assert!(!check_dbus_name(&sink, "", DbusName::Bus, "single"));
        assert!(check_dbus_name(
            &sink,
            "",
            DbusName::Path,
            "/org/mpris/MediaPlayer2"
        ));
        assert!(!check_dbus_name(&sink, "", DbusName::Path, "/org//x"));
        assert!(!check_dbus_name(&sink, "", DbusName::Member, "2go"));
        assert_eq!(path_from_id("com.my-app.Mail"), "/com/my_app/Mail");
    }

    #[test]
    fn placeholders_are_found_in_order() {
        let p: Vec<_> = placeholders("a ${x} b ${y}${z} ${unclosed").collect();
        assert_eq!(p, ["x", "y", "z"]);
    }
}
