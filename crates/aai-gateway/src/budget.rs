//! What one request may cost before it is parsed. A JSON text of many small values
//! (`[0,0,0,…]`) costs dozens of times its size once parsed: one 15 MiB request took
//! 1.95 GB. So each front door (stdio lines, HTTP bodies) scans the raw bytes first —
//! one pass, no allocation — and refuses a message with more values or deeper nesting
//! than any MCP request needs, and each bounds how many requests are in flight.

/// Most JSON values (objects, arrays, strings, numbers, literals) in one request.
pub(crate) const MAX_VALUES: usize = 200_000;
/// Deepest nesting of objects and arrays in one request.
pub(crate) const MAX_DEPTH: usize = 64;
/// Most requests of one stdio session in progress at once; more are refused until some
/// are answered.
pub(crate) const MAX_IN_FLIGHT: usize = 1024;
/// Most bytes of requests (as sent) in progress at once in one stdio session, and being
/// read and handled at once over HTTP.
pub(crate) const MAX_IN_FLIGHT_BYTES: usize = 256 * 1024 * 1024;

/// Why `json` is too costly to parse, if it is. Unbalanced or broken text is left to the
/// parser (it fails cheaply).
pub(crate) fn problem(json: &[u8]) -> Option<String> {
    let (mut values, mut depth, mut deepest) = (0usize, 0usize, 0usize);
    let mut in_string = false;
    let mut escaped = false;
    // Whether a scalar value (number, literal) is being read.
    let mut in_scalar = false;
    for &b in json {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                in_scalar = false;
                values += 1;
            }
            b'{' | b'[' => {
                in_scalar = false;
                values += 1;
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => {
                in_scalar = false;
                depth = depth.saturating_sub(1);
            }
            b',' | b':' | b' ' | b'\t' | b'\r' | b'\n' => in_scalar = false,
            _ => {
                if !in_scalar {
                    in_scalar = true;
                    values += 1;
                }
            }
        }
        if values > MAX_VALUES {
            return Some(format!(
                "the message has more than {MAX_VALUES} JSON values; send large data as one string"
            ));
        }
        if deepest > MAX_DEPTH {
            return Some(format!("the message nests deeper than {MAX_DEPTH} levels"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costly_shapes_are_refused_before_parsing() {
        assert_eq!(problem(br#"{"a":[1,2,{"b":"x,y[{"}],"c":true}"#), None);
        let many = format!("[{}0]", "0,".repeat(MAX_VALUES));
        assert!(problem(many.as_bytes()).unwrap().contains("JSON values"));
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(problem(deep.as_bytes()).unwrap().contains("nests deeper"));
        // Brackets and commas inside strings are text.
        let text = format!(r#"{{"s":"{}"}}"#, "[,".repeat(MAX_VALUES));
        assert_eq!(problem(text.as_bytes()), None);
        // A large request of few values is fine.
        let big = format!(r#"{{"data":"{}"}}"#, "x".repeat(10 << 20));
        assert_eq!(problem(big.as_bytes()), None);
    }
}
