//! Go-style flag parsing, as the consul CLI does it (`flag` package rules):
//! `-name value`, `-name=value`, `--name`; boolean flags take no separate value
//! (`-shell=false`, not `-shell false`); `--` ends the flags.
//!
//! Unlike Go's parser, flags may also follow the first positional (`baton elect
//! KEY -value V -- CMD`). For commands that run a child, the command starts at
//! `--`, or at the first word after the required positionals that is not a flag,
//! and everything from there on belongs to it verbatim.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// What kind of value a flag takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `-flag` or `-flag=true|false`.
    Bool,
    /// `-flag value` or `-flag=value`.
    Value,
}

/// One flag a command accepts.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    /// The name without dashes.
    pub name: &'static str,
    /// Bool or value.
    pub kind: Kind,
    /// Placeholder of the value in the help text (`""` for bool flags).
    pub value_name: &'static str,
    /// One line (or a few) of help.
    pub help: &'static str,
}

/// The result of parsing one command line.
#[derive(Debug, Default)]
pub struct Parsed {
    values: HashMap<&'static str, String>,
    /// The positional arguments (before the child command).
    pub positionals: Vec<String>,
    /// The child command (empty for commands that run none).
    pub command: Vec<String>,
    /// `-h`, `-help` or `--help` was given.
    pub help: bool,
}

/// A command-line problem, reported with the command's usage line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Parses `args` (the words after the subcommand).
///
/// `positionals` is how many positional arguments come before the child
/// command when `wants_command` is true; otherwise every non-flag word is a
/// positional.
pub fn parse(
    args: &[String],
    flags: &[Flag],
    positionals: usize,
    wants_command: bool,
) -> Result<Parsed, UsageError> {
    let mut out = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            let rest = &args[i..];
            if wants_command {
                let need = positionals.saturating_sub(out.positionals.len());
                let take = need.min(rest.len());
                out.positionals.extend(rest[..take].iter().cloned());
                out.command = rest[take..].to_vec();
            } else {
                out.positionals.extend(rest.iter().cloned());
            }
            return Ok(out);
        }
        if a.len() > 1 && a.starts_with('-') {
            let body = a.strip_prefix("--").unwrap_or(&a[1..]);
            if body.is_empty() || body.starts_with('-') || body.starts_with('=') {
                return Err(UsageError(format!("bad flag syntax: {a}")));
            }
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            if name == "h" || name == "help" {
                out.help = true;
                continue;
            }
            let Some(spec) = flags.iter().find(|f| f.name == name) else {
                let hint = if wants_command && out.positionals.len() >= positionals {
                    " (put the command to run after `--`)"
                } else {
                    ""
                };
                return Err(UsageError(format!(
                    "flag provided but not defined: -{name}{hint}"
                )));
            };
            let value = match (spec.kind, inline) {
                (Kind::Bool, None) => "true".to_string(),
                (Kind::Bool, Some(v)) => {
                    if parse_bool(&v).is_none() {
                        return Err(UsageError(format!(
                            "invalid boolean value {v:?} for -{name}: use true or false"
                        )));
                    }
                    v
                }
                (Kind::Value, Some(v)) => v,
                (Kind::Value, None) => {
                    if i >= args.len() {
                        return Err(UsageError(format!("flag needs an argument: -{name}")));
                    }
                    i += 1;
                    args[i - 1].clone()
                }
            };
            out.values.insert(spec.name, value);
            continue;
        }
        if wants_command && out.positionals.len() >= positionals {
            out.command = args[i - 1..].to_vec();
            return Ok(out);
        }
        out.positionals.push(a.clone());
    }
    Ok(out)
}

impl Parsed {
    /// The raw value of a flag, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// A boolean flag (validated while parsing), or `default`.
    pub fn flag(&self, name: &str, default: bool) -> bool {
        self.get(name).and_then(parse_bool).unwrap_or(default)
    }

    /// A Go duration (`"1.5s"`, `"250ms"`, `"1m"`), or `default`.
    pub fn duration(&self, name: &str, default: Duration) -> Result<Duration, UsageError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => baton::parse_go_duration(v).ok_or_else(|| {
                UsageError(format!(
                    "invalid value {v:?} for -{name}: expected a duration like \"500ms\", \"15s\" or \"2m\""
                ))
            }),
        }
    }

    /// A non-negative integer, or `default`.
    pub fn uint(&self, name: &str, default: u64) -> Result<u64, UsageError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.parse::<i64>().ok().map_or_else(
                || {
                    Err(UsageError(format!(
                        "invalid value {v:?} for -{name}: expected a whole number"
                    )))
                },
                |n| {
                    u64::try_from(n).map_err(|_| {
                        UsageError(format!("invalid value {v:?} for -{name}: must be >= 0"))
                    })
                },
            ),
        }
    }
}

/// Renders the flags part of a help text.
pub fn flags_help(flags: &[Flag]) -> String {
    let mut s = String::new();
    for f in flags {
        let head = if f.kind == Kind::Bool {
            format!("  -{}", f.name)
        } else {
            format!("  -{}={}", f.name, f.value_name)
        };
        s.push_str(&head);
        s.push('\n');
        for line in f.help.lines() {
            s.push_str("      ");
            s.push_str(line);
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: &[Flag] = &[
        Flag {
            name: "n",
            kind: Kind::Value,
            value_name: "N",
            help: "limit",
        },
        Flag {
            name: "shell",
            kind: Kind::Bool,
            value_name: "",
            help: "shell",
        },
    ];

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn consul_style_command_without_dashes() {
        let p = parse(&words("-n 2 -shell=false pfx echo -n hi"), FLAGS, 1, true).unwrap();
        assert_eq!(p.get("n"), Some("2"));
        assert!(!p.flag("shell", true));
        assert_eq!(p.positionals, vec!["pfx"]);
        assert_eq!(p.command, words("echo -n hi"));
    }

    #[test]
    fn double_dash_and_flags_after_the_positional() {
        let p = parse(&words("pfx --n=3 -- echo -- x"), FLAGS, 1, true).unwrap();
        assert_eq!(p.get("n"), Some("3"));
        assert_eq!(p.command, words("echo -- x"));
        let p = parse(&words("-- pfx cmd"), FLAGS, 1, true).unwrap();
        assert_eq!(p.positionals, vec!["pfx"]);
        assert_eq!(p.command, vec!["cmd"]);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = parse(&words("-x pfx cmd"), FLAGS, 1, true).unwrap_err();
        assert_eq!(e.0, "flag provided but not defined: -x");
        let e = parse(&words("pfx -x cmd"), FLAGS, 1, true).unwrap_err();
        assert!(e.0.contains("after `--`"), "{e}");
        let e = parse(&words("pfx -n"), FLAGS, 1, true).unwrap_err();
        assert_eq!(e.0, "flag needs an argument: -n");
        let e = parse(&words("-shell=maybe pfx c"), FLAGS, 1, true).unwrap_err();
        assert!(e.0.contains("invalid boolean"), "{e}");
        let p = parse(&words("-n -3 pfx c"), FLAGS, 1, true).unwrap();
        assert!(p.uint("n", 1).unwrap_err().0.contains(">= 0"));
    }

    #[test]
    fn commands_without_a_child_collect_positionals() {
        let p = parse(&words("destroy -n 1 abc"), FLAGS, 0, false).unwrap();
        assert_eq!(p.positionals, words("destroy abc"));
        assert!(p.command.is_empty());
    }
}
