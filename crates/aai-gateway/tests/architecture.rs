//! ARCHITECTURE.md's "must never" rules that are about who may use what, checked on the
//! source text (clippy.toml bans the constructors; this checks the imports too).

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `line` is an attribute that compiles what follows for tests only.
fn test_only(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("#[cfg(test)]") || t.starts_with("#[cfg(all(test")
}

/// `text` without what is compiled for tests only: each item under `#[cfg(test)]` (or
/// `#[cfg(all(test, …))]`) is blanked whole — a `mod tests;` line, or everything to the
/// brace that closes the item — and the code after it is kept, wherever it sits. Blank
/// lines stand in for the ones left out, so line numbers stay the file's.
fn production(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < lines.len() {
        if !test_only(lines[i]) {
            out.push_str(lines[i]);
            out.push('\n');
            i += 1;
            continue;
        }
        // Skip the attribute (and any more attributes), then the item.
        let from = i;
        i += 1;
        while i < lines.len() && lines[i].trim_start().starts_with("#[") {
            i += 1;
        }
        let mut depth = 0i64;
        let mut opened = false;
        while i < lines.len() {
            let code = code_of(lines[i]);
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            i += 1;
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                break;
            }
        }
        out.push_str(&"\n".repeat(i - from));
    }
    out
}

/// The files of `src` that are modules for tests only (`#[cfg(test)] mod name;` in the
/// file that declares them).
fn test_modules(files: &[PathBuf]) -> std::collections::HashSet<PathBuf> {
    let mut found = std::collections::HashSet::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            if !test_only(line) {
                continue;
            }
            let attributes = lines[n + 1..]
                .iter()
                .take_while(|l| l.trim_start().starts_with("#["));
            // `#[path = "x_tests.rs"]`: relative to the declaring file's folder.
            let path = attributes.clone().find_map(|l| {
                l.trim()
                    .strip_prefix("#[path = \"")
                    .and_then(|rest| rest.strip_suffix("\"]"))
            });
            let Some(item) = lines[n + 1..]
                .iter()
                .find(|l| !l.trim_start().starts_with("#["))
            else {
                continue;
            };
            if let Some(path) = path {
                found.insert(f.parent().unwrap().join(path));
                continue;
            }
            let Some(name) = item
                .trim()
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'))
            else {
                continue;
            };
            // `a/mod.rs` and `a.rs` declare `a/name.rs`; `a/b.rs` declares `a/b/name.rs`.
            let dir = match f.file_stem().and_then(|s| s.to_str()) {
                Some("mod") | Some("lib") | Some("main") => f.parent().unwrap().to_path_buf(),
                Some(stem) => f.parent().unwrap().join(stem),
                None => continue,
            };
            found.insert(dir.join(format!("{name}.rs")));
            found.insert(dir.join(name).join("mod.rs"));
        }
    }
    found
}

/// Every production source file under `src` (relative path with `/`, and its code
/// without what is compiled for tests only).
fn production_sources(src: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let tests = test_modules(&files);
    files
        .iter()
        .filter(|f| !tests.contains(*f))
        .map(|f| {
            let rel = f
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, production(&std::fs::read_to_string(f).unwrap()))
        })
        .collect()
}

/// The code of `line`: comments and string literals left out (a log directive that
/// names a crate's log target does not use the crate).
fn code_of(line: &str) -> String {
    let code = line.split("//").next().unwrap_or("");
    code.split('"').step_by(2).collect()
}

/// Source files (relative to `src/`, with `/`) whose code — comments and string literals
/// left out — contains `needle`.
fn users(needle: &str) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut found: Vec<String> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .any(|line| code_of(line).contains(needle))
        })
        .map(|f| {
            f.strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect();
    found.sort();
    found
}

fn only_under(needle: &str, allowed: &[&str]) {
    let bad: Vec<String> = users(needle)
        .into_iter()
        .filter(|f| !allowed.iter().any(|a| f.starts_with(a)))
        .collect();
    assert!(
        bad.is_empty(),
        "`{needle}` is used outside {allowed:?}: {bad:?}"
    );
}

#[test]
fn only_mcp_knows_rmcp() {
    // The server side in `mcp/`, the client of downstream servers in `exec/mcp/client.rs`
    // (and its `client/`) and what those servers ask of the client in `exec/mcp/asks.rs`.
    only_under(
        "rmcp::",
        &[
            "mcp/",
            "exec/mcp/client.rs",
            "exec/mcp/client/",
            "exec/mcp/asks.rs",
        ],
    );
    only_under("axum::", &["listen.rs", "ui/", "mcp/http.rs"]);
    // Only the front doors that serve MCP start it (`lib.rs`: the tests' `testing`).
    only_under("crate::mcp", &["mcp/", "cli/mod.rs", "listen.rs", "lib.rs"]);
    only_under("crate::ui", &["listen.rs", "lib.rs"]);
}

#[test]
fn front_doors_hold_a_pipeline_and_a_handle_not_the_gateway() {
    // `mcp/`, `ui/` and the listener reach the executors, the consent gate and the
    // credentials only through `Pipeline`, and the rest through `gateway::Handle`.
    for needle in ["gateway::Gateway", "Arc<Gateway>", "&Gateway", "Gateway::"] {
        let bad: Vec<String> = users(needle)
            .into_iter()
            .filter(|f| f.starts_with("mcp/") || f.starts_with("ui/") || f == "listen.rs")
            .collect();
        assert!(bad.is_empty(), "a front door names `{needle}`: {bad:?}");
    }
}

#[test]
fn modules_are_the_crates_own_and_tests_reach_them_through_testing() {
    // `pub(crate)` modules let `unreachable_pub` find every `pub` nobody outside uses;
    // integration tests and benchmarks go through the `#[doc(hidden)]` `testing` module.
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let public: Vec<&str> = lib
        .lines()
        .filter(|l| l.starts_with("pub mod ") && l.ends_with(';'))
        .collect();
    assert!(public.is_empty(), "public modules in lib.rs: {public:?}");
    assert!(
        lib.contains("pub(crate) mod pipeline;"),
        "the checker reads lib.rs"
    );
}

#[test]
fn only_process_spawns_and_only_net_builds_http_clients() {
    only_under("Command::new", &["exec/process.rs"]);
    only_under("Client::builder", &["net.rs"]);
    only_under("ClientBuilder", &["net.rs"]);
}

#[test]
fn only_the_store_touches_the_keyring_and_only_dbus_modules_know_zbus() {
    only_under("keyring::", &["auth/store.rs"]);
    only_under("zbus::", &["exec/dbus/", "catalog/bus.rs"]);
    // Authoring is the command line's: the server never drafts descriptors.
    // `manage/`: the agent's import (the gateway's own app) uses the CLI's converters
    // (ARCHITECTURE.md, Invariants).
    only_under("aai_author::", &["cli/", "manage/", "catalog/bus.rs"]);
}

#[test]
fn only_the_store_and_its_users_speak_postgresql() {
    // The driver and its pool in `store/`; each subsystem's queries beside it; the config
    // checks `store.url` with the driver's own parser.
    only_under(
        "tokio_postgres::",
        &[
            "store/",
            "consent/shared.rs",
            "history/",
            "auth/store.rs",
            "config.rs",
        ],
    );
    only_under("deadpool_postgres::", &["store/"]);
}

#[test]
fn the_checker_sees_what_it_checks() {
    // A rule that finds nothing proves nothing: each needle is really used somewhere.
    for needle in [
        "rmcp::",
        "Command::new",
        "Client::builder",
        "keyring::",
        "zbus::",
        "aai_author::",
        "tokio_postgres::",
        "deadpool_postgres::",
    ] {
        assert!(!users(needle).is_empty(), "`{needle}` is used nowhere");
    }
    // Sibling test files (`#[path = "x_tests.rs"] mod tests;`) are tests, not production.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let production = production_sources(&src);
    assert!(production.iter().any(|(f, _)| f == "config.rs"));
    assert!(!production.iter().any(|(f, _)| f == "config_tests.rs"));
}

#[test]
fn the_build_script_tells_cargo_only_the_commit_reruns_and_link_arguments() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("build.rs"))
        .expect("build.rs");
    let allowed = [
        "cargo::rerun-if-changed=",
        "cargo::rerun-if-env-changed=",
        "cargo::rustc-env=AAI_GATEWAY_COMMIT=",
        "cargo::rustc-link-arg-bin=aai-gateway=",
    ];
    let directives: Vec<&str> = text
        .match_indices("cargo:")
        .map(|(at, _)| &text[at..])
        .collect();
    assert!(directives.len() >= 5, "the checker finds the directives");
    for directive in directives {
        assert!(
            allowed.iter().any(|a| directive.starts_with(a)),
            "build.rs tells cargo {}",
            directive.lines().next().unwrap_or_default()
        );
    }
}

/// Each source file outside the edge that builds and shows wire errors (`error.rs`,
/// `mcp/`, `cli/`, `ui/`): its path relative to `src/` and its code without what is
/// compiled for tests only ([`production`]).
fn beyond_the_edge() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    production_sources(&src)
        .into_iter()
        .filter(|(rel, _)| {
            !["error.rs", "mcp/", "cli/", "ui/"]
                .iter()
                .any(|e| rel.starts_with(e))
        })
        .collect()
}

#[test]
fn control_flow_never_branches_on_a_wire_code() {
    // Outside the edge that builds and shows wire errors (`error.rs`, `mcp/`, `cli/`,
    // `ui/`), no code compares or matches a `Code`: a subsystem that needs a decision
    // returns a typed error. Tests may look at codes.
    let mut bad = Vec::new();
    for (rel, body) in beyond_the_edge() {
        for (n, line) in body.lines().enumerate() {
            let code = code_of(line);
            // `Code::` as a path of its own: `StatusCode::` (HTTP's) is not the wire's.
            let wire: Vec<usize> = code
                .match_indices("Code::")
                .map(|(at, _)| at)
                .filter(|&at| {
                    at == 0 || {
                        let before = code.as_bytes()[at - 1];
                        !(before.is_ascii_alphanumeric() || before == b'_')
                    }
                })
                .collect();
            let branches = wire.iter().any(|&at| {
                let left = code[..at].trim_end();
                left.ends_with("==")
                    || left.ends_with("!=")
                    || code.find("=>").is_some_and(|arm| at < arm)
                    || code.contains("matches!")
            });
            if branches {
                bad.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(bad.is_empty(), "branches on a wire code: {bad:#?}");
}

#[test]
fn the_descriptor_and_authoring_crates_do_no_io() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for krate in ["aai-descriptor", "aai-author"] {
        let src = crates.join(krate).join("src");
        let files = production_sources(&src);
        assert!(!files.is_empty(), "{krate} has no sources at {src:?}");
        for (f, text) in files {
            for line in text.lines() {
                let code = code_of(line);
                for io in [
                    "std::fs",
                    "std::net",
                    "std::process",
                    "std::env",
                    "tokio",
                    "reqwest",
                    "tracing::",
                ] {
                    assert!(!code.contains(io), "{f:?} uses {io}: {line}");
                }
            }
        }
    }
}

/// The top-level modules of `src/` (a file or a folder) each module's code names, tests
/// left out.
fn module_imports() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name != "lib" && name != "main" {
            modules.insert(name, path);
        }
    }
    let mut imports = std::collections::BTreeMap::new();
    let everything = production_sources(&src);
    for (name, path) in &modules {
        let mut named = std::collections::BTreeSet::new();
        let ours = |rel: &str| {
            if path.is_dir() {
                rel.starts_with(&format!("{name}/"))
            } else {
                rel == format!("{name}.rs")
            }
        };
        for (_, text) in everything.iter().filter(|(rel, _)| ours(rel)) {
            let code: String = text.lines().map(|l| code_of(l) + "\n").collect();
            // `crate::x` and `crate::{x, y::z}`.
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let heads: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group
                        .split('}')
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .map(str::trim)
                        .collect(),
                    None => vec![rest],
                };
                for head in heads {
                    let module: String = head
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if module != *name && modules.contains_key(&module) {
                        named.insert(module);
                    }
                }
            }
        }
        imports.insert(name.clone(), named);
    }
    imports
}

#[test]
fn top_level_modules_import_each_other_without_a_cycle() {
    let imports = module_imports();
    assert!(
        imports.values().any(|i| !i.is_empty()),
        "the checker found no imports at all"
    );
    // Depth-first search; a module met again while on the path closes a cycle.
    fn visit(
        module: &str,
        imports: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module.to_owned());
            return Some(cycle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_owned());
        for next in &imports[module] {
            if let Some(cycle) = visit(next, imports, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(module.to_owned());
        None
    }
    // The small helpers know no module that uses them.
    for leaf in ["text", "lines", "budget", "host", "net"] {
        assert!(
            imports[leaf].is_empty(),
            "`{leaf}` imports {:?}",
            imports[leaf]
        );
    }
    let mut done = std::collections::BTreeSet::new();
    for module in imports.keys() {
        let cycle = visit(module, &imports, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "import cycle: {}",
            cycle.unwrap().join(" → ")
        );
    }
}

/// Where a public item (`pub`, `pub(crate)`) of the gateway or of the two library crates
/// that opens with one of `items` (`fn `, `type `) names a string error (`, String>`, a
/// line break or a trailing comma before `>` allowed), and how many such items were read.
/// A function's signature is read from the line that opens it and the next few, and only
/// what it returns counts; an alias, to the `;` that ends it.
fn string_errors(items: &[&str]) -> (usize, Vec<String>) {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut bad = Vec::new();
    let mut read = 0;
    for krate in ["aai-gateway", "aai-descriptor", "aai-author"] {
        let src = crates.join(krate).join("src");
        let files = production_sources(&src);
        assert!(!files.is_empty(), "{krate} has no sources at {src:?}");
        for (f, text) in files {
            let lines: Vec<&str> = text.lines().collect();
            for (n, line) in lines.iter().enumerate() {
                let Some(item) = ["pub ", "pub(crate) "].iter().find_map(|v| {
                    items
                        .iter()
                        .find(|i| line.trim_start().starts_with(&format!("{v}{i}")))
                }) else {
                    continue;
                };
                let named: String = if item.starts_with("type ") {
                    let end = lines[n..]
                        .iter()
                        .position(|l| code_of(l).trim_end().ends_with(';'))
                        .map_or(lines.len(), |e| n + e + 1);
                    lines[n..end].iter().map(|l| code_of(l)).collect()
                } else {
                    let signature: String = lines[n..lines.len().min(n + 8)]
                        .iter()
                        .take_while(|l| !l.trim_end().ends_with('{') || l.contains("fn "))
                        .chain(lines[n..].iter().find(|l| l.trim_end().ends_with('{')))
                        .map(|l| code_of(l))
                        .collect();
                    signature.split("->").nth(1).unwrap_or("").to_owned()
                };
                read += 1;
                let flat: String = named.split_whitespace().collect();
                if flat.contains(",String>") || flat.contains(",String,>") {
                    bad.push(format!("{krate}/src/{f}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    (read, bad)
}

#[test]
fn no_string_errors_cross_a_module_boundary() {
    // A public function (`pub`, `pub(crate)`) tells its callers in other modules why it
    // failed with a typed error, not with text; `pub(super)` helpers inside one subsystem
    // may. In the gateway and in the two library crates, whose callers are the gateway's
    // modules.
    let (read, bad) = string_errors(&["fn ", "async fn "]);
    assert!(read > 500, "the checker found the functions ({read})");
    assert!(
        bad.is_empty(),
        "string errors in public signatures: {bad:#?}"
    );
}

#[test]
fn no_public_type_alias_names_a_string_error() {
    // What a public type alias names crosses module boundaries as a function's signature
    // does: an alias of a callback (`exec::Asker`) says why it failed with a typed error.
    let (read, bad) = string_errors(&["type "]);
    assert!(read >= 5, "the checker found the aliases ({read})");
    assert!(
        bad.is_empty(),
        "string errors in public type aliases: {bad:#?}"
    );
}

#[test]
fn wire_errors_are_built_only_at_the_edge_and_in_conversions() {
    // A subsystem says why it failed with its own error type; that type's
    // `impl From<…> for GatewayError`, beside it, is the one place its failures get a
    // wire code. Beyond those impls, only the edge (`error.rs`, `mcp/`, `cli/`, `ui/`)
    // builds a `GatewayError` itself.
    let mut bad = Vec::new();
    let mut conversions = 0;
    for (rel, body) in beyond_the_edge() {
        // Depth of braces, and the depth at which a conversion's block opened.
        let mut depth = 0usize;
        let mut conversion: Option<usize> = None;
        for (n, line) in body.lines().enumerate() {
            let code = code_of(line);
            if conversion.is_none()
                && code.contains("impl From<")
                && code.contains("for GatewayError")
            {
                conversion = Some(depth);
                conversions += 1;
            }
            let builds = code.contains("GatewayError::new(")
                || (code.contains("GatewayError {") && !code.contains("-> GatewayError {"));
            if builds && conversion.is_none() {
                bad.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
            for c in code.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth = depth.saturating_sub(1);
                        if conversion == Some(depth) {
                            conversion = None;
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "wire errors built outside a conversion: {bad:#?}"
    );
    assert!(
        conversions >= 15,
        "the checker found the conversions ({conversions})"
    );
}

#[test]
fn the_checker_sees_the_code_after_a_test_module() {
    // The rules above read `production(..)`: tests are left out wherever they sit, and
    // what follows them is still read (truncating at the first `#[cfg(test)]` hid it).
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn t() { if x { } }\n}\n\
                fn after() {}\n#[cfg(all(test, unix))]\n#[allow(dead_code)]\nmod more;\n\
                fn last() {}\n";
    let kept = production(text);
    assert!(
        kept.contains("fn after()") && kept.contains("fn last()"),
        "{kept}"
    );
    assert!(
        !kept.contains("fn t()") && !kept.contains("mod more"),
        "{kept}"
    );
    assert_eq!(
        kept.lines().count(),
        text.lines().count(),
        "line numbers kept"
    );
    // And a module declared for tests only is not read as production code.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let read: Vec<String> = production_sources(&src)
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert!(read.contains(&"consent/mod.rs".to_owned()));
    assert!(!read.contains(&"consent/tests.rs".to_owned()), "{read:?}");
}
