//! `?filter=` expressions: the part of go-bexpr's grammar Consul's docs use, evaluated on
//! the JSON form of each listed item (field names as Consul returns them).
//!
//! ```text
//! expr     := and ("or" and)*
//! and      := unary ("and" unary)*
//! unary    := "not" unary | "(" expr ")" | match
//! match    := selector ("==" | "!=") value
//!           | selector ("is empty" | "is not empty")
//!           | value ("in" | "not in") selector
//!           | selector ("contains" | "not contains" | "matches" | "not matches") value
//! selector := name ("." name | "[" "string" "]")*
//! value    := "string" | `raw` | number | bare word
//! ```
//!
//! `Meta["key"]` and `Meta.key` select the same map entry, as in go-bexpr (whose error for
//! `NodeMeta["synthetic"]` before this was `expected an operator, found Str("synthetic")`).
//!
//! `matches` is a substring test here, not a regular expression.

use serde_json::Value;

use crate::query::{Query, Reply};

#[derive(Debug, Clone)]
enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Eq(Vec<String>, String, bool),
    Empty(Vec<String>, bool),
    In(String, Vec<String>, bool),
    Contains(Vec<String>, String, bool),
}

/// A parsed `?filter=` expression (none: everything matches).
pub(crate) struct Filter {
    expr: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Op(&'static str),
    Open,
    Close,
    /// `[`, opening an index selector.
    LBrack,
    /// `]`, closing an index selector.
    RBrack,
}

fn lex(s: &str) -> Result<Vec<Tok>, String> {
    let c: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '(' {
            out.push(Tok::Open);
            i += 1;
        } else if ch == ')' {
            out.push(Tok::Close);
            i += 1;
        } else if ch == '[' || ch == ']' {
            out.push(if ch == '[' { Tok::LBrack } else { Tok::RBrack });
            i += 1;
        } else if ch == '=' || ch == '!' {
            if c.get(i + 1) != Some(&'=') {
                return Err(format!("1:{} unexpected {ch:?}", i + 1));
            }
            out.push(Tok::Op(if ch == '=' { "==" } else { "!=" }));
            i += 2;
        } else if ch == '"' || ch == '`' {
            let mut j = i + 1;
            let mut v = String::new();
            while j < c.len() && c[j] != ch {
                if ch == '"' && c[j] == '\\' && j + 1 < c.len() {
                    j += 1;
                }
                v.push(c[j]);
                j += 1;
            }
            if j >= c.len() {
                return Err(format!("1:{} unterminated string", i + 1));
            }
            out.push(Tok::Str(v));
            i = j + 1;
        } else {
            let mut j = i;
            while j < c.len() && !c[j].is_whitespace() && !"()=!\"`[]".contains(c[j]) {
                j += 1;
            }
            out.push(Tok::Word(c[i..j].iter().collect()));
            i = j;
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// Nesting of `not` and parentheses, bounded so a hostile expression cannot exhaust the
    /// stack.
    depth: usize,
}

/// The deepest nesting an expression may have.
const MAX_DEPTH: usize = 64;
/// The most tokens an expression may have.
const MAX_TOKENS: usize = 4096;

impl Parser {
    fn peek_word(&self, w: &str) -> bool {
        matches!(self.toks.get(self.pos), Some(Tok::Word(x)) if x == w)
    }

    fn word_at(&self, off: usize, w: &str) -> bool {
        matches!(self.toks.get(self.pos + off), Some(Tok::Word(x)) if x == w)
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut e = self.and()?;
        while self.peek_word("or") {
            self.pos += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        while self.peek_word("and") {
            self.pos += 1;
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("expression nested too deeply".into());
        }
        let e = self.unary_inner();
        self.depth -= 1;
        e
    }

    fn unary_inner(&mut self) -> Result<Expr, String> {
        if self.peek_word("not") {
            self.pos += 1;
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.toks.get(self.pos) == Some(&Tok::Open) {
            self.pos += 1;
            let e = self.or()?;
            if self.toks.get(self.pos) != Some(&Tok::Close) {
                return Err("expected \")\"".into());
            }
            self.pos += 1;
            return Ok(e);
        }
        self.matcher()
    }

    fn value(&mut self) -> Result<String, String> {
        match self.toks.get(self.pos).cloned() {
            Some(Tok::Str(s)) | Some(Tok::Word(s)) => {
                self.pos += 1;
                Ok(s)
            }
            t => Err(format!("expected a value, found {t:?}")),
        }
    }

    fn selector(&mut self) -> Result<Vec<String>, String> {
        let mut path: Vec<String> = match self.toks.get(self.pos).cloned() {
            Some(Tok::Word(w)) if !w.is_empty() => {
                self.pos += 1;
                w.split('.').map(str::to_string).collect()
            }
            t => return Err(format!("expected a selector, found {t:?}")),
        };
        // `["key"]` indexes, each possibly followed by `.name` parts (`Meta["a"].b`).
        while self.toks.get(self.pos) == Some(&Tok::LBrack) {
            let key = match self.toks.get(self.pos + 1).cloned() {
                Some(Tok::Str(k)) => k,
                t => return Err(format!("expected a quoted index key, found {t:?}")),
            };
            if self.toks.get(self.pos + 2) != Some(&Tok::RBrack) {
                return Err("expected \"]\"".into());
            }
            self.pos += 3;
            path.push(key);
            if let Some(Tok::Word(w)) = self.toks.get(self.pos).cloned() {
                if let Some(rest) = w.strip_prefix('.') {
                    self.pos += 1;
                    path.extend(rest.split('.').map(str::to_string));
                }
            }
        }
        Ok(path)
    }

    fn matcher(&mut self) -> Result<Expr, String> {
        // value [not] in selector
        let first = self.toks.get(self.pos).cloned();
        if self.word_at(1, "in") || (self.word_at(1, "not") && self.word_at(2, "in")) {
            let v = self.value()?;
            let negate = self.peek_word("not");
            self.pos += if negate { 2 } else { 1 };
            return Ok(Expr::In(v, self.selector()?, negate));
        }
        if matches!(first, Some(Tok::Str(_))) {
            return Err("expected \"in\" after a value".into());
        }
        let sel = self.selector()?;
        match self.toks.get(self.pos).cloned() {
            Some(Tok::Op(op)) => {
                self.pos += 1;
                Ok(Expr::Eq(sel, self.value()?, op == "!="))
            }
            Some(Tok::Word(w)) if w == "is" => {
                self.pos += 1;
                let negate = self.peek_word("not");
                if negate {
                    self.pos += 1;
                }
                if !self.peek_word("empty") {
                    return Err("expected \"empty\"".into());
                }
                self.pos += 1;
                Ok(Expr::Empty(sel, negate))
            }
            Some(Tok::Word(w)) if w == "contains" || w == "matches" || w == "not" => {
                let negate = w == "not";
                self.pos += if negate { 2 } else { 1 };
                Ok(Expr::Contains(sel, self.value()?, negate))
            }
            t => Err(format!("expected an operator, found {t:?}")),
        }
    }
}

fn select<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, p| cur.get(p.as_str()))
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

fn eval(e: &Expr, v: &Value) -> bool {
    match e {
        Expr::Or(a, b) => eval(a, v) || eval(b, v),
        Expr::And(a, b) => eval(a, v) && eval(b, v),
        Expr::Not(a) => !eval(a, v),
        Expr::Eq(sel, want, neg) => {
            let got = select(v, sel).map(text).unwrap_or_default();
            (got == *want) != *neg
        }
        Expr::Empty(sel, neg) => {
            let empty = match select(v, sel) {
                None | Some(Value::Null) => true,
                Some(Value::String(s)) => s.is_empty(),
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(o)) => o.is_empty(),
                Some(_) => false,
            };
            empty != *neg
        }
        Expr::In(want, sel, neg) => contains(select(v, sel), want) != *neg,
        Expr::Contains(sel, want, neg) => contains(select(v, sel), want) != *neg,
    }
}

fn contains(v: Option<&Value>, want: &str) -> bool {
    match v {
        Some(Value::Array(a)) => a.iter().any(|x| text(x) == want),
        Some(Value::Object(o)) => o.contains_key(want),
        Some(Value::String(s)) => s.contains(want),
        _ => false,
    }
}

impl Filter {
    /// The request's filter, if any; an expression that does not parse is Consul's 500 from
    /// the RPC layer (`bexpr.CreateFilter`).
    pub fn from_query(q: &Query) -> Result<Filter, Reply> {
        let f = q.get("filter");
        if f.trim().is_empty() {
            return Ok(Filter { expr: None });
        }
        let parsed = lex(f).and_then(|toks| {
            // Bounded so evaluating (and dropping) the tree cannot exhaust the stack.
            if toks.len() > MAX_TOKENS {
                return Err("expression too long".to_string());
            }
            let mut p = Parser {
                toks,
                pos: 0,
                depth: 0,
            };
            let e = p.or()?;
            if p.pos != p.toks.len() {
                return Err(format!("unexpected {:?}", p.toks[p.pos]));
            }
            Ok(e)
        });
        match parsed {
            Ok(e) => Ok(Filter { expr: Some(e) }),
            Err(msg) => Err(Reply::text(
                500,
                format!("Failed to create boolean expression evaluator: {msg}"),
            )),
        }
    }

    /// Whether a filter was given.
    pub fn is_some(&self) -> bool {
        self.expr.is_some()
    }

    /// Whether `v` passes the filter.
    pub fn matches(&self, v: &Value) -> bool {
        match &self.expr {
            None => true,
            Some(e) => eval(e, v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(s: &str) -> Filter {
        Filter::from_query(&Query::parse(Some(&format!(
            "filter={}",
            percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC)
        ))))
        .unwrap()
    }

    #[test]
    fn evaluates_the_forms_consul_documents() {
        let v = json!({"Node": "n1", "Service": {"Tags": ["a", "b"]}, "Status": "passing"});
        assert!(f(r#"Node == "n1""#).matches(&v));
        assert!(!f(r#"Node != "n1""#).matches(&v));
        assert!(f(r#""a" in Service.Tags"#).matches(&v));
        assert!(f(r#""z" not in Service.Tags"#).matches(&v));
        assert!(f("Status == `passing` and not (Node == x)").matches(&v));
        assert!(f("Missing is empty or Node == n2").matches(&v));
        let m = json!({"NodeMeta": {"synthetic": "true", "a.b": "x"}});
        assert!(f(r#"NodeMeta["synthetic"] == "true""#).matches(&m));
        assert!(f(r#"NodeMeta["synthetic"] == true"#).matches(&m));
        assert!(f(r#"NodeMeta["a.b"] == x and NodeMeta.synthetic != false"#).matches(&m));
        assert!(f(r#""synthetic" in NodeMeta and NodeMeta["none"] is empty"#).matches(&m));
        assert!(
            Filter::from_query(&Query::parse(Some("filter=NodeMeta%5Bx%5D+%3D%3D+1"))).is_err()
        );
        assert!(
            Filter::from_query(&Query::parse(Some("filter=not+a+valid+expression(("))).is_err()
        );
    }
}
