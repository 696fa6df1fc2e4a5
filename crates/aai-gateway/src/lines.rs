//! Reading newline-delimited streams whose lines may be hostile: a line is read to its
//! end but only its first bytes are kept, so no peer can make the gateway buffer without
//! bound (adapter stderr, MCP on stdin).

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Reads up to and including the next `\n`, keeping at most `max` bytes of it in `out`;
/// returns how many bytes were consumed (0 at the end).
pub(crate) async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    out: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(consumed);
        }
        let (n, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = max.saturating_sub(out.len());
        out.extend_from_slice(&buf[..n.min(room)]);
        reader.consume(n);
        consumed += n;
        if done {
            return Ok(consumed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stderr_lines_are_capped() {
        let data: Vec<u8> = [vec![b'x'; 100_000], b"\nshort\n".to_vec(), vec![b'y'; 10]].concat();
        let mut reader = tokio::io::BufReader::new(&data[..]);
        let mut line = Vec::new();
        assert_eq!(
            read_line_capped(&mut reader, &mut line, 4096)
                .await
                .unwrap(),
            100_001
        );
        assert_eq!(line.len(), 4096);
        line.clear();
        read_line_capped(&mut reader, &mut line, 4096)
            .await
            .unwrap();
        assert_eq!(line, b"short\n");
        line.clear();
        assert_eq!(
            read_line_capped(&mut reader, &mut line, 4096)
                .await
                .unwrap(),
            10
        );
        line.clear();
        assert_eq!(
            read_line_capped(&mut reader, &mut line, 4096)
                .await
                .unwrap(),
            0
        );
    }
}
