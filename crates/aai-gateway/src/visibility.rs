//! Per-client visibility (config `clients`, `docs/config.md`): which apps and tools each
//! MCP client may see. A client name is the one consent uses (the `clientInfo.name` it
//! sent); `"*"` is everyone. For each client the rules of `"*"` apply, then its own:
//!
//! * `apps.allow`: when given, only these apps (ids; `prefix.*` matches a family);
//! * `apps.deny`: never these;
//! * `tools.deny`: never these tools (`<appId>:<tool>`).
//!
//! The rules only: `registry/view.rs` makes a client's view of the snapshot from them.

use std::collections::{BTreeMap, BTreeSet};

/// One client's rules (or everyone's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// `apps.allow`: only these apps, when given.
    pub allow: Option<Vec<String>>,
    /// `apps.deny`.
    pub deny: Vec<String>,
    /// `tools.deny`, as `(app id, tool)`.
    pub deny_tools: Vec<(String, String)>,
}

impl Rules {
    fn app(&self, id: &str) -> bool {
        self.allow
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|p| matches(p, id)))
            && !self.deny.iter().any(|p| matches(p, id))
    }

    fn tool(&self, app: &str, tool: &str) -> bool {
        !self
            .deny_tools
            .iter()
            .any(|(a, t)| matches(a, app) && (t == tool || t == "*"))
    }
}

/// An app id pattern: the id itself, `prefix.*` for every id under `prefix.`, or `*`
/// for every id. (`com.example*` is an id, not a pattern: it matches nothing else.)
fn matches(pattern: &str, id: &str) -> bool {
    match pattern.strip_suffix(".*") {
        _ if pattern == "*" => true,
        Some(prefix) => id
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.')),
        None => pattern == id,
    }
}

/// `web.auth.scopeAccess`: per OAuth scope, the apps and tools it opens to a person. A
/// person sees an app (a tool) when at least one scope they hold has rules that let them;
/// with no rules at all, scopes limit nothing. These apply on top of the client's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeAccess {
    by_scope: BTreeMap<String, Rules>,
}

impl ScopeAccess {
    /// Rules by scope.
    pub fn new(by_scope: BTreeMap<String, Rules>) -> ScopeAccess {
        ScopeAccess { by_scope }
    }

    /// Whether any rule is set (else every person sees what their client sees).
    pub fn limits(&self) -> bool {
        !self.by_scope.is_empty()
    }

    /// The scopes with rules.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.by_scope.keys().map(String::as_str)
    }

    fn held<'a>(&'a self, scopes: &'a [String]) -> impl Iterator<Item = &'a Rules> + 'a {
        scopes.iter().filter_map(|s| self.by_scope.get(s))
    }

    /// Whether a person holding `scopes` may see app `id`.
    pub fn app(&self, scopes: &[String], id: &str) -> bool {
        !self.limits() || self.held(scopes).any(|r| r.app(id))
    }

    /// Whether a person holding `scopes` may see the tool of app `id` named `names` (a
    /// tool the user renamed has two): one scope must open it by every name.
    pub fn tool(&self, scopes: &[String], id: &str, names: &[&str]) -> bool {
        !self.limits()
            || self
                .held(scopes)
                .any(|r| r.app(id) && names.iter().all(|n| r.tool(id, n)))
    }
}

/// Everyone's and each client's rules, and the apps only some clients see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Visibility {
    by_client: BTreeMap<String, Rules>,
    /// Per app id: the only clients that see it.
    audience: BTreeMap<String, BTreeSet<String>>,
}

impl Visibility {
    /// Rules by client name (`"*"`: everyone).
    pub fn new(by_client: BTreeMap<String, Rules>) -> Visibility {
        Visibility {
            by_client,
            audience: BTreeMap::new(),
        }
    }

    /// These rules with `more` added (their deny lists joined; an allow list stays
    /// this one's) and the apps of `audience` seen only by the clients it names.
    pub fn with(
        &self,
        more: BTreeMap<String, Rules>,
        audience: BTreeMap<String, BTreeSet<String>>,
    ) -> Visibility {
        let mut out = self.clone();
        for (client, rules) in more {
            let mine = out.by_client.entry(client).or_default();
            mine.deny.extend(rules.deny);
            mine.deny_tools.extend(rules.deny_tools);
        }
        out.audience.extend(audience);
        out
    }

    /// The client names with rules (`"*"` for everyone), in order.
    pub fn clients(&self) -> impl Iterator<Item = &str> {
        self.by_client.keys().map(String::as_str)
    }

    /// The only clients that see app `id`, when an import limited it.
    pub fn audience(&self, id: &str) -> Option<&BTreeSet<String>> {
        self.audience.get(id)
    }

    /// What the rules hide of app `id` with `tools`, per client with rules: `(client,
    /// None)` for the whole app, `(client, Some(tool))` for one of its tools.
    pub fn hidden<'a>(
        &'a self,
        id: &'a str,
        tools: &'a [String],
    ) -> impl Iterator<Item = (&'a str, Option<&'a str>)> + 'a {
        self.clients().flat_map(move |client| {
            let whole = !self.app(client, id);
            let one_by_one: Vec<(&str, Option<&str>)> = if whole {
                vec![(client, None)]
            } else {
                tools
                    .iter()
                    .filter(|t| !self.tool(client, id, t))
                    .map(|t| (client, Some(t.as_str())))
                    .collect()
            };
            one_by_one
        })
    }

    /// Whether a rule limits `client` to an allow list (it then may not add web apps).
    pub fn allow_listed(&self, client: &str) -> bool {
        self.rules(client).any(|r| r.allow.is_some())
    }

    /// Whether any rule applies to `client`.
    pub fn limits(&self, client: &str) -> bool {
        self.by_client.contains_key("*")
            || self.by_client.contains_key(client)
            || !self.audience.is_empty()
    }

    fn rules<'a>(&'a self, client: &'a str) -> impl Iterator<Item = &'a Rules> + 'a {
        ["*", client]
            .into_iter()
            .filter_map(|c| self.by_client.get(c))
    }

    /// Whether `client` may see app `id`.
    pub fn app(&self, client: &str, id: &str) -> bool {
        self.rules(client).all(|r| r.app(id))
            && self
                .audience
                .get(id)
                .is_none_or(|only| only.contains(client))
    }

    /// Whether `client` may see `tool` of app `id`.
    pub fn tool(&self, client: &str, id: &str, tool: &str) -> bool {
        self.rules(client).all(|r| r.tool(id, tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: Option<&[&str]>, deny: &[&str], tools: &[(&str, &str)]) -> Rules {
        Rules {
            allow: allow.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
            deny: deny.iter().map(|s| (*s).to_owned()).collect(),
            deny_tools: tools
                .iter()
                .map(|(a, t)| ((*a).to_owned(), (*t).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn a_person_sees_what_some_scope_of_theirs_opens() {
        let access = ScopeAccess::new(BTreeMap::from([
            (
                "notes".to_owned(),
                rules(Some(&["com.example.notes"]), &[], &[]),
            ),
            (
                "everything".to_owned(),
                rules(
                    None,
                    &["com.example.secret"],
                    &[("com.example.notes", "purge")],
                ),
            ),
        ]));
        let notes = ["notes".to_owned()];
        let all = ["everything".to_owned()];
        let both = ["notes".to_owned(), "everything".to_owned()];
        assert!(access.app(&notes, "com.example.notes"));
        assert!(!access.app(&notes, "com.example.mail"));
        assert!(access.app(&all, "com.example.mail"));
        assert!(!access.app(&all, "com.example.secret"));
        assert!(!access.app(&[], "com.example.notes"), "no scope, nothing");
        assert!(!access.tool(&all, "com.example.notes", &["purge"]));
        assert!(access.tool(&notes, "com.example.notes", &["purge"]));
        assert!(
            access.tool(&both, "com.example.notes", &["purge"]),
            "one scope that allows is enough"
        );
        assert!(
            !access.tool(&notes, "com.example.mail", &["send"]),
            "the app first"
        );
        let open = ScopeAccess::default();
        assert!(open.app(&[], "anything") && open.tool(&[], "anything", &["x"]));
    }

    #[test]
    fn a_renamed_tool_is_opened_only_by_a_scope_that_opens_both_its_names() {
        // One scope hides it by the app's own name, the other by the user's new name:
        // neither opens the tool.
        let access = ScopeAccess::new(BTreeMap::from([
            (
                "a".to_owned(),
                rules(None, &[], &[("com.example.notes", "purge")]),
            ),
            (
                "b".to_owned(),
                rules(None, &[], &[("com.example.notes", "wipe")]),
            ),
        ]));
        let both = ["a".to_owned(), "b".to_owned()];
        assert!(access.tool(&both, "com.example.notes", &["purge"]));
        assert!(!access.tool(&both, "com.example.notes", &["wipe", "purge"]));
    }

    #[test]
    fn everyones_rules_and_a_clients_own_both_apply() {
        let v = Visibility::new(BTreeMap::from([
            ("*".to_owned(), rules(None, &["com.example.secret"], &[])),
            (
                "claude-code".to_owned(),
                rules(
                    Some(&["com.example.*"]),
                    &[],
                    &[("com.example.notes", "delete")],
                ),
            ),
        ]));
        assert!(v.limits("claude-code") && v.limits("anyone"));
        assert!(v.app("anyone", "org.other.app"));
        assert!(!v.app("anyone", "com.example.secret"));
        assert!(!v.app("claude-code", "com.example.secret"));
        assert!(!v.app("claude-code", "org.other.app"));
        assert!(v.app("claude-code", "com.example.notes"));
        let prefix = rules(Some(&["com.example*"]), &[], &[]);
        assert!(!prefix.app("com.exampleevil.x") && prefix.app("com.example*"));
        assert!(!v.tool("claude-code", "com.example.notes", "delete"));
        assert!(v.tool("claude-code", "com.example.notes", "create"));
        assert!(v.tool("cursor", "com.example.notes", "delete"));
        let only = Visibility::default().with(
            BTreeMap::from([("*".to_owned(), rules(None, &["a.b"], &[]))]),
            BTreeMap::from([("a.c".to_owned(), BTreeSet::from(["cursor".to_owned()]))]),
        );
        assert!(only.limits("anyone") && !only.app("anyone", "a.b"));
        assert!(only.app("cursor", "a.c") && !only.app("codex", "a.c"));
        let none = Visibility::default();
        assert!(!none.limits("x") && none.app("x", "a") && none.tool("x", "a", "t"));
    }
}
