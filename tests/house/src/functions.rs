//! Function lengths: every `fn` with a body in code already through [`crate::scan::code_only`]
//! (and usually [`crate::scan::without_tests`]), with its name, first line and length in lines.
//!
//! A long function is usually a state machine or a pipeline waiting to be named; the house
//! rule bounds them per crate (see `tests/house.rs`).

/// One function with a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// The line of its `fn` keyword (1-based).
    pub line: usize,
    /// Lines from the `fn` keyword to the closing brace, both included.
    pub lines: usize,
}

/// Every function with a body in `code`, in order of their `fn` keyword; nested functions are
/// listed too, and counted inside their parent as well. Function pointer types (`fn(u8)`) and
/// bodiless declarations (`fn f();` in a trait) are not functions here.
pub fn functions(code: &str) -> Vec<Function> {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("fn").map(|p| from + p) {
        from = at + 2;
        let starts_token = at == 0 || !ident(b[at - 1]);
        if !starts_token || !b.get(at + 2).is_some_and(|c| c.is_ascii_whitespace()) {
            continue;
        }
        let rest = code[at + 2..].trim_start();
        let name: String = rest
            .bytes()
            .take_while(|&c| ident(c))
            .map(char::from)
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first `{` before any `;`.
        let Some(open) = code[at..].find(['{', ';']).map(|p| at + p) else {
            break;
        };
        if b[open] == b';' {
            continue;
        }
        let Some(close) = matching_brace(b, open) else {
            break;
        };
        let line = crate::scan::line_of(code, at);
        out.push(Function {
            name,
            line,
            lines: crate::scan::line_of(code, close) - line + 1,
        });
    }
    out
}

/// The offset of the `}` that closes the `{` at `open`.
fn matching_brace(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::code_only;

    #[test]
    fn functions_are_found_with_their_lengths() {
        let src = "\
pub async fn first(x: impl Fn(u8) -> u8) -> u8 {
    let s = \"fn not_a_function() { }\"; // fn nor_this() {}
    x(1)
}
trait T {
    fn declared(&self);
    fn defaulted(&self) -> u8 { 1 }
}
fn generic<F>(f: F) -> Vec<fn(u8)>
where
    F: Fn(),
{
    fn inner() {}
    Vec::new()
}
";
        let got = functions(&code_only(src));
        let brief: Vec<_> = got
            .iter()
            .map(|f| (f.name.as_str(), f.line, f.lines))
            .collect();
        assert_eq!(
            brief,
            [
                ("first", 1, 4),
                ("defaulted", 7, 1),
                ("generic", 9, 7),
                ("inner", 13, 1)
            ]
        );
    }
}
