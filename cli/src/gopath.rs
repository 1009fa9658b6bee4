//! Go's `path.Join`/`path.Clean`, which consul lock uses to build its keys
//! (`path.Join(prefix, ".lock")`, `path.Join(prefix, session)`).

/// Go's `path.Clean` for a relative or rooted slash-separated path.
pub fn clean(p: &str) -> String {
    if p.is_empty() {
        return ".".to_string();
    }
    let rooted = p.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|l| *l != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    let joined = out.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// Go's `path.Join(a, b)`.
pub fn join(a: &str, b: &str) -> String {
    let parts: Vec<&str> = [a, b].into_iter().filter(|s| !s.is_empty()).collect();
    if parts.is_empty() {
        return String::new();
    }
    clean(&parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_go() {
        assert_eq!(join("service/web", ".lock"), "service/web/.lock");
        assert_eq!(join("service/web/", ".lock"), "service/web/.lock");
        assert_eq!(join("a//b/./c/..", ".lock"), "a/b/.lock");
        assert_eq!(join("..", "x"), "../x");
        assert_eq!(clean("/../a"), "/a");
        assert_eq!(clean(""), ".");
    }
}
