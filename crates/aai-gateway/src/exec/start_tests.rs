//! Tests of `start.rs`.

use super::*;

fn stdio(command: &str, args: &[&str], env: &[(&str, &str)]) -> Executor {
    Executor::Mcp(McpServer::Stdio(Process {
        command: command.into(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }))
}

#[test]
fn the_command_line_is_shown_quoted_with_secret_env_names_only() {
    let s = start_of(
        &stdio(
            "npx",
            &["-y", "@modelcontextprotocol/server-everything", "a b"],
            &[("GITHUB_TOKEN", "ghp_secret")],
        ),
        Path::new("/srv"),
    )
    .unwrap();
    assert_eq!(
        s.shown,
        "npx -y @modelcontextprotocol/server-everything 'a b' (with GITHUB_TOKEN set)"
    );
    assert!(s.downloads);
    assert!(!s.describe().contains("ghp_secret"));
    assert!(s.describe().ends_with("(downloads a package and runs it)"));
    // A value that changes what runs is shown; one shaped like a secret is not.
    let s = start_of(
        &stdio(
            "npx",
            &["x"],
            &[
                ("NODE_OPTIONS", "--require /tmp/evil.js"),
                ("DB", "postgres://u:pw@h/db"),
                ("PAT", "ghp_0123456789abcdefghij"),
            ],
        ),
        Path::new("/srv"),
    )
    .unwrap();
    assert_eq!(
        s.shown,
        "npx x (with NODE_OPTIONS='--require /tmp/evil.js', DB, PAT set)"
    );
}

#[test]
fn secrets_in_arguments_are_masked_and_every_word_is_shown() {
    let s = start_of(
        &stdio(
            "docker",
            &[
                "run",
                "-e",
                "GITHUB_TOKEN=ghp_S1",
                "--api-key",
                "S2",
                "--token=S3",
                "-H",
                "Authorization: Bearer S4",
                "--url",
                "https://user:S5@h.example/x?api_key=S6&q=kept",
                "sk-S7abcdefghijklmnopqrstu",
                "X-Api-Key: S8",
                "img",
            ],
            &[],
        ),
        Path::new("/srv"),
    )
    .unwrap();
    for n in 1..=8 {
        assert!(!s.shown.contains(&format!("S{n}")), "S{n} in {}", s.shown);
    }
    assert_eq!(
        s.shown,
        "docker run -e 'GITHUB_TOKEN=***' --api-key '***' '--token=***' -H 'Authorization: Bearer ***' \
             --url 'https://user:***@h.example/x?api_key=***&q=kept' '***' 'X-Api-Key: ***' img"
    );
    // The pin still covers the real values.
    let other = start_of(
        &stdio("docker", &["run", "-e", "GITHUB_TOKEN=ghp_other"], &[]),
        Path::new("/srv"),
    )
    .unwrap();
    let first = start_of(
        &stdio("docker", &["run", "-e", "GITHUB_TOKEN=ghp_S1"], &[]),
        Path::new("/srv"),
    )
    .unwrap();
    assert_eq!(other.shown, first.shown);
    assert_ne!(other.pin, first.pin);
    // Past any history bound: no argument is left out.
    let many: Vec<String> = (0..80).map(|i| format!("a{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let s = start_of(&stdio("x", &many, &[]), Path::new("/")).unwrap();
    assert!(s.shown.ends_with(" a79"), "{}", s.shown);
}

#[test]
fn variables_that_change_what_runs_are_shown_whatever_their_name() {
    let s = start_of(
        &stdio(
            "npx",
            &["x"],
            &[
                ("NODE_TLS_REJECT_UNAUTHORIZED", "0"),
                ("HTTPS_PROXY", "http://u:pw@127.0.0.1:8080"),
                ("GIT_SSH_COMMAND", "ssh -i /tmp/k"),
                ("HOME", "/tmp/evil"),
                ("XDG_CONFIG_HOME", "/tmp/cfg"),
                ("DOCKER_CONTEXT", "remote"),
                ("PYTHONINSPECT", "1"),
                ("API_TOKEN", "t0k"),
            ],
        ),
        Path::new("/srv"),
    )
    .unwrap();
    for shown in [
        "NODE_TLS_REJECT_UNAUTHORIZED=0",
        "HTTPS_PROXY='http://u:***@127.0.0.1:8080'",
        "GIT_SSH_COMMAND='ssh -i /tmp/k'",
        "HOME=/tmp/evil",
        "XDG_CONFIG_HOME=/tmp/cfg",
        "DOCKER_CONTEXT=remote",
        "PYTHONINSPECT=1",
    ] {
        assert!(s.shown.contains(shown), "{shown} not in {}", s.shown);
    }
    assert!(s.shown.contains(", API_TOKEN set)") && !s.shown.contains("t0k"));
    assert!(run_changing("https_proxy") && run_changing("NPM_CONFIG_REGISTRY"));
    assert!(!run_changing("GITHUB_TOKEN"));
}

#[test]
fn anything_that_decides_what_runs_changes_the_pin() {
    let base = |e: &Executor, dir: &str| start_of(e, Path::new(dir)).unwrap().pin;
    let one = base(&stdio("srv", &["a"], &[("K", "v")]), "/d");
    assert_eq!(one, base(&stdio("srv", &["a"], &[("K", "v")]), "/d"));
    for other in [
        base(&stdio("srv2", &["a"], &[("K", "v")]), "/d"),
        base(&stdio("srv", &["b"], &[("K", "v")]), "/d"),
        base(&stdio("srv", &["a"], &[("K", "w")]), "/d"),
        base(&stdio("srv", &["a"], &[("K", "v")]), "/e"),
        base(&stdio("srv", &["a", ""], &[("K", "v")]), "/d"),
    ] {
        assert_ne!(one, other);
    }
}

#[test]
fn package_runners_are_told_from_plain_programs() {
    let d =
        |c: &str, a: &[&str]| downloads(c, &a.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>());
    assert!(d("npx", &["-y", "pkg"]));
    assert!(d("/usr/bin/uvx", &["mcp-server-time"]));
    assert!(d("C:\\node\\npx.cmd", &["pkg"]));
    assert!(d("pipx", &["run", "pkg"]));
    assert!(d("pnpm", &["dlx", "pkg"]));
    assert!(d("docker", &["run", "-i", "--rm", "img"]));
    assert!(!d("node", &["server.js"]));
    assert!(!d("python3", &["-m", "server"]));
    assert!(!d("npm", &["start"]));
    assert!(!d("uv", &["run", "server.py"]));
}

#[test]
fn http_servers_are_connected_to_and_other_executors_start_nothing() {
    let http = Executor::Mcp(McpServer::Http {
        url: "https://mcp.example.com/mcp".into(),
        headers: vec![],
        mode: aai_descriptor::HttpMode::Detect,
    });
    let s = start_of(&http, Path::new("/")).unwrap();
    assert_eq!(s.describe(), "connect to https://mcp.example.com/…");
    assert!(start_of(&Executor::Applescript, Path::new("/")).is_none());
}
