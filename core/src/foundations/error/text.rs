//! Text from servers and callers made safe for one-line messages: escaped and bounded.

/// Most bytes of a server's text that an error message quotes (after escaping);
/// the rest is replaced by a `… (N bytes)` marker.
pub(crate) const SHOWN_TEXT_MAX: usize = 512;

/// Most bytes of Consul's text kept in [`Error::server_text`].
pub(crate) const SERVER_TEXT_MAX: usize = 4096;

/// Most bytes of any error message (before the `… (N bytes)` marker).
pub(crate) const MESSAGE_MAX: usize = 2048;

/// Whether `c` must not appear as is in a one-line message: C0/C1 controls and
/// DEL (ESC, NUL, CR, LF, …), Unicode line/paragraph separators, and the
/// invisible direction overrides that can make text read differently than it is.
pub(crate) fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// Appends `c`, escaped if needed (`\t`, `\n`, `\r`, otherwise `\u{..}`).
pub(crate) fn push_char(out: &mut String, c: char) {
    use std::fmt::Write as _;
    if !needs_escape(c) {
        out.push(c);
        return;
    }
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        _ => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// Text that came from outside (a response body, a value in an answer), made
/// safe to show on one line: invalid UTF-8 becomes U+FFFD, control characters
/// are escaped visibly (see [`needs_escape`]), and once the escaped text would
/// pass `max` bytes it is cut and `… (N bytes)` (N = the length of `raw`) is
/// appended. Only the part that is shown is examined, so a huge `raw` costs
/// no more than a short one.
pub(crate) fn printable(raw: &[u8], max: usize) -> String {
    let mut out = String::with_capacity(raw.len().min(max) + 24);
    for chunk in raw.utf8_chunks() {
        let invalid = (!chunk.invalid().is_empty()).then_some('\u{fffd}');
        for c in chunk.valid().chars().chain(invalid) {
            let before = out.len();
            push_char(&mut out, c);
            if out.len() > max {
                out.truncate(before);
                out.push_str(&format!("\u{2026} ({} bytes)", raw.len()));
                return out;
            }
        }
    }
    out
}

/// `message` unchanged when it is already one printable line of at most `max`
/// bytes (the usual case), else its [`printable`] form.
pub(crate) fn bounded(message: String, max: usize) -> String {
    if message.len() <= max && !message.chars().any(needs_escape) {
        message
    } else {
        printable(message.as_bytes(), max)
    }
}
