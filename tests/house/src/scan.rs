//! Rust source reduced to its code: comments and the contents of string and character
//! literals become spaces (newlines stay, so byte offsets and line numbers still match the
//! file), and items under `#[cfg(test)]` can be dropped.

/// `src` with every comment and every literal's contents blanked. Handles line and nested
/// block comments, strings with escapes, raw strings (`r#"…"#`, `br"…"`), byte strings, and
/// character literals as opposed to lifetimes (`'a'` and `'\n'` are literals, `'a` is not).
pub fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = src[i..].find('\n').map_or(b.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0usize;
                let mut j = i;
                while j < b.len() {
                    if b[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if b[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            b'r' | b'b' if raw_string_start(b, i).is_some() => {
                let (open_end, hashes) = raw_string_start(b, i).unwrap_or((i + 1, 0));
                let mut close = vec![b'"'];
                close.extend(std::iter::repeat_n(b'#', hashes));
                let end = b[open_end..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |p| open_end + p + close.len());
                blank(&mut out, open_end, end.saturating_sub(close.len()));
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            b'\'' => {
                if b.get(i + 1) == Some(&b'\\') {
                    let mut j = i + 2;
                    while j < b.len() && b[j] != b'\'' {
                        j += 1;
                    }
                    blank(&mut out, i + 1, j);
                    i = j + 1;
                } else if let Some(len) = src[i + 1..].chars().next().map(char::len_utf8)
                    && b.get(i + 1 + len) == Some(&b'\'')
                {
                    blank(&mut out, i + 1, i + 1 + len);
                    i += 2 + len;
                } else {
                    i += 1;
                }
            }
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                // Skip the whole identifier, so a name ending in `r` or `b` is not a prefix.
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Where a raw or byte string starting at `i` opens: the index after its opening quote and
/// its number of `#`s. `None` if `i` does not start one (a plain `b"…"` counts, with 0).
fn raw_string_start(b: &[u8], i: usize) -> Option<(usize, usize)> {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return None;
    }
    let mut j = i;
    if b.get(j) == Some(&b'b') {
        j += 1;
    }
    let raw = b.get(j) == Some(&b'r');
    if raw {
        j += 1;
    }
    let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
    if !raw && hashes > 0 {
        return None;
    }
    j += hashes;
    (j > i && b.get(j) == Some(&b'"')).then_some((j + 1, hashes))
}

/// `code` (already through [`code_only`]) with every item marked `#[cfg(test)]` blanked: the
/// attribute, and the item up to its `;` or the end of its braced body.
pub fn without_tests(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let b = code.as_bytes();
    let mut out = b.to_vec();
    let mut from = 0;
    while let Some(at) = code[from..].find(MARK).map(|p| from + p) {
        let mut j = at + MARK.len();
        while j < b.len() && b[j] != b'{' && b[j] != b';' {
            j += 1;
        }
        if j < b.len() && b[j] == b'{' {
            let mut depth = 0usize;
            while j < b.len() {
                match b[j] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        let end = (j + 1).min(b.len());
        for c in &mut out[at..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(out).unwrap_or_default()
}

/// The 1-based line of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&c| c == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_literals_are_blanked_and_lines_kept() {
        let src = "let a = \"crate::x // y\"; // crate::z\n/* crate::w /* nested */ */ b\n";
        let code = code_only(src);
        assert_eq!(code.len(), src.len());
        assert!(!code.contains("crate::"), "{code}");
        assert!(code.contains("let a"));
        assert!(code.contains(" b\n"));
        assert_eq!(code.matches('\n').count(), 2);
    }

    #[test]
    fn raw_strings_chars_and_lifetimes() {
        let src = r####"let s = r#"a "quoted" crate::x"#; let c = '"'; let d = '\''; fn f<'a>(x: &'a str) -> crate::y::Z {}"####;
        let code = code_only(src);
        assert!(!code.contains("crate::x"), "{code}");
        assert!(code.contains("crate::y::Z"), "{code}");
        assert!(code.contains("<'a>"), "{code}");
        let b = code_only(r#"let v = br"x\"; let w = b"crate::q"; crate::k"#);
        assert!(!b.contains("crate::q") && b.contains("crate::k"), "{b}");
    }

    #[test]
    fn a_name_ending_in_r_is_not_a_raw_string() {
        let code = code_only("let timer = 1; let var\"x\" = 2; crate::m");
        assert!(code.contains("crate::m"), "{code}");
    }

    #[test]
    fn test_items_are_dropped() {
        let code = without_tests(
            "use crate::a;\n#[cfg(test)]\nmod tests { use crate::b; fn f() { {} } }\n#[cfg(test)]\nuse crate::c;\nuse crate::d;\n",
        );
        assert!(
            code.contains("crate::a") && code.contains("crate::d"),
            "{code}"
        );
        assert!(
            !code.contains("crate::b") && !code.contains("crate::c"),
            "{code}"
        );
    }
}
