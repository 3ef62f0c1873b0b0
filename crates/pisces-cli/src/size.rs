//! Byte sizes on the command line: `4096`, `64K`, `64M`, `1G`, `2T` (also `64KiB`,
//! `64MB`, `64m`, ...). Every suffix is a power of 1024: `M` and `MB` and `MiB` all mean
//! 1 048 576 bytes.

/// Parse a byte size with an optional binary suffix.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits_end);
    if num.is_empty() {
        return Err(format!(
            "`{s}` is not a size: expected a whole number of bytes, optionally followed by K, M, G or T (e.g. 64M)"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is too large to be a size"))?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "`{s}`: unknown size suffix `{other}` (use K, M, G or T; all are powers of 1024)"
            ))
        }
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{s}` is too large to be a size"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn plain_numbers_and_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("12b"), Ok(12));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64MB"), Ok(64 << 20));
        assert_eq!(parse_size(" 1G "), Ok(1 << 30));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert_eq!(parse_size("16777215T"), Ok(16_777_215 << 40));
    }

    #[test]
    fn bad_sizes_are_errors_that_say_why() {
        for bad in ["", "M", "-1", "1.5G", "12Q", "64 MiBs", "0x100"] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{bad}: {e}");
        }
        assert!(parse_size("99999999999999999999")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_size("16777216T").unwrap_err().contains("too large"));
    }
}
