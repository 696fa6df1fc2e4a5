//! A property-test harness for the descriptor parser: every fixture (valid and broken) is
//! mutated many times — at the byte level and at the JSON level — and parsed. The parser
//! must never panic; what it accepts must serialize and its tool schemas must build.
//!
//! Deterministic (a fixed seed per fixture), bounded (`AAI_FUZZ_ITERS` mutations per
//! fixture, default 600 — about 12,000 executions, a few seconds in a debug build). For a
//! longer run: `AAI_FUZZ_ITERS=200000 AAI_FUZZ_SEED=7 cargo test --release -p
//! aai-descriptor --test fuzz -- --nocapture`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use serde_json::{Map, Value, json};

/// xorshift64*: small, seedable, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "null",
    "true",
    "-1e999",
    "1e400",
    "0.0000001",
    "\"\\u0000\"",
    "\"${x}\"",
    "\"..\"",
    "\"{id}\"",
    "\\",
    "\u{2028}",
    "«",
    "»",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
];

fn odd_value(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => Value::Null,
        1 => json!(-1),
        2 => json!(u64::MAX),
        3 => json!(1.5e300),
        4 => json!(""),
        5 => json!("x".repeat(10_000)),
        6 => json!({}),
        7 => json!([]),
        8 => json!({"type": "strng", "$ref": "#/nowhere", "pattern": "(unclosed"}),
        9 => json!([[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]),
        10 => json!("../../etc/passwd"),
        _ => json!(true),
    }
}

/// Mutates one random place of a JSON tree.
fn mutate_json(v: &mut Value, rng: &mut Rng, depth: usize) {
    let here = depth > 6 || rng.below(4) == 0;
    match v {
        Value::Object(map) if !map.is_empty() && !here => {
            let i = rng.below(map.len());
            let key = map.keys().nth(i).cloned().unwrap_or_default();
            match rng.below(5) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    let child = map.remove(&key).unwrap_or(Value::Null);
                    map.insert(format!("{key}_"), child);
                }
                2 => {
                    map.insert(format!("unknown{}", rng.below(99)), odd_value(rng));
                }
                _ => {
                    if let Some(child) = map.get_mut(&key) {
                        mutate_json(child, rng, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) if !items.is_empty() && !here => {
            let i = rng.below(items.len());
            match rng.below(4) {
                0 => {
                    items.remove(i);
                }
                1 => {
                    let copy = items[i].clone();
                    items.push(copy);
                }
                _ => mutate_json(&mut items[i], rng, depth + 1),
            }
        }
        _ => *v = odd_value(rng),
    }
}

/// Mutates the text itself.
fn mutate_bytes(text: &str, rng: &mut Rng) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..=rng.below(3) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(4) {
            0 if !bytes.is_empty() => {
                let end = (at + rng.below(16)).min(bytes.len());
                bytes.drain(at.min(end)..end);
            }
            1 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
            2 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                bytes.splice(at..at, token.bytes());
            }
            _ if !bytes.is_empty() => {
                let start = rng.below(bytes.len());
                let end = (start + rng.below(64)).min(bytes.len());
                let copy = bytes[start..end].to_vec();
                bytes.splice(at..at, copy);
            }
            _ => {}
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Parses `text`; panics (caught by the caller) are the only failure.
fn exercise(text: &str) {
    let parsed = aai_descriptor::parse(text, "fuzz");
    for d in &parsed.diagnostics {
        let _ = d.to_string();
    }
    if let Some(app) = parsed.app {
        serde_json::to_string(&app).expect("an accepted app serializes");
        for binding in &app.bindings {
            for tool in &binding.tools {
                tool.parameters
                    .validator()
                    .expect("a loaded schema builds its validator");
            }
        }
    }
}

#[test]
fn mutated_descriptors_never_crash_the_parser() {
    let iters: usize = std::env::var("AAI_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let seed: u64 = std::env::var("AAI_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut fixtures = Vec::new();
    for dir in ["valid", "broken"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            fixtures.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
        }
    }
    fixtures.sort();
    let (mut runs, mut crashes) = (0usize, Vec::new());
    for (n, (path, text)) in fixtures.iter().enumerate() {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (n as u64 + 1));
        let tree: Option<Value> = serde_json::from_str(text).ok();
        for i in 0..iters {
            let input = match (&tree, i % 2) {
                (Some(tree), 0) => {
                    let mut t = tree.clone();
                    for _ in 0..=rng.below(3) {
                        mutate_json(&mut t, &mut rng, 0);
                    }
                    t.to_string()
                }
                _ => mutate_bytes(text, &mut rng),
            };
            runs += 1;
            if catch_unwind(AssertUnwindSafe(|| exercise(&input))).is_err() {
                crashes.push((path.display().to_string(), i, input));
            }
        }
    }
    // Structural extremes the mutations rarely reach.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let mut wide = Map::new();
    for i in 0..20_000 {
        wide.insert(format!("k{i}"), json!(i));
    }
    for input in [
        deep,
        Value::Object(wide).to_string(),
        "\u{feff}{}".to_owned(),
    ] {
        runs += 1;
        if catch_unwind(AssertUnwindSafe(|| exercise(&input))).is_err() {
            crashes.push(("extreme".into(), 0, input.chars().take(200).collect()));
        }
    }
    println!("fuzz: {runs} executions, {} crashes", crashes.len());
    assert!(
        crashes.is_empty(),
        "{} inputs crashed the parser; first: {:?}",
        crashes.len(),
        crashes
            .first()
            .map(|(p, i, t)| (p, i, t.chars().take(300).collect::<String>()))
    );
}
