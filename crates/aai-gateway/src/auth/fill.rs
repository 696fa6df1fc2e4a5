//! `${NAME}` placeholders in the `env` values of the programs the gateway starts
//! (downstream MCP servers, ACP agents, stdio adapters) and the `headers` values of MCP
//! servers over HTTP, so that a descriptor never holds a secret: each is filled when the
//! program starts (or the server is reached) from the credential store's entry for the
//! app and that name — stored with `aai-gateway auth set <app> --secret NAME` — or, only
//! when config `secrets.fromEnvironment` is true, from the gateway's own environment.
//!
//! A placeholder is `${` + a name of letters, digits and `_` (not starting with a digit) +
//! `}`; it may stand anywhere in a value (`Bearer ${TOKEN}`). Anything else is literal.

use aai_descriptor::{Executor, McpServer};

use super::Secret;

/// The store entry of an app's secret `name`.
pub(crate) fn entry(app: &str, name: &str) -> String {
    format!("{app}#{name}")
}

/// The placeholder name of app `app`'s store entry `key` (`None`: the app's own
/// credential, or another app's entry).
pub(crate) fn name_of<'a>(app: &str, key: &'a str) -> Option<&'a str> {
    key.strip_prefix(app)?.strip_prefix('#')
}

/// The placeholder names of `text`, in order (repeats included).
pub(crate) use aai_descriptor::placeholder_names as names_in;

/// Every placeholder `executor` uses (sorted, once each).
pub(crate) fn names(executor: &Executor) -> Vec<String> {
    let values: Vec<&str> = match executor {
        Executor::Stdio(p) | Executor::Acp(p) | Executor::Mcp(McpServer::Stdio(p)) => {
            p.env.iter().map(|(_, v)| v.as_str()).collect()
        }
        Executor::Mcp(McpServer::Http { headers, .. }) => {
            headers.iter().map(|(_, v)| v.as_str()).collect()
        }
        _ => Vec::new(),
    };
    let mut names: Vec<String> = values
        .into_iter()
        .flat_map(names_in)
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `template` with each placeholder whose value is in `values` filled in.
pub(crate) fn fill(template: &str, values: &[(String, Secret)]) -> String {
    if !template.contains("${") {
        return template.to_owned();
    }
    let mut out = template.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("${{{name}}}"), value.expose());
    }
    out
}

/// `pairs` (names and values) with the values filled.
pub(crate) fn fill_all(
    pairs: &[(String, String)],
    values: &[(String, Secret)],
) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.clone(), fill(v, values)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aai_descriptor::looks_secret;

    #[test]
    fn placeholders_are_found_and_filled() {
        assert_eq!(
            names_in("Bearer ${TOKEN} and ${ORG_2} but not ${2x} or ${a-b} or ${open")
                .collect::<Vec<_>>(),
            ["TOKEN", "ORG_2"]
        );
        let values = vec![("TOKEN".to_owned(), Secret::new("t0k"))];
        assert_eq!(fill("Bearer ${TOKEN}", &values), "Bearer t0k");
        assert_eq!(fill("${OTHER}", &values), "${OTHER}");
        assert!(
            looks_secret("GITHUB_TOKEN") && looks_secret("X-Api-Key") && !looks_secret("LOG_LEVEL")
        );
    }
}
