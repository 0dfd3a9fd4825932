//! Rust source as the few tokens the import check needs: identifiers, `::`,
//! braces, and the punctuation that ends or splits a `use`. Comments, the
//! insides of string and character literals, and lifetimes are dropped, so a
//! path written in a doc comment or a message is not taken for an import;
//! string literals are kept whole only for `#[path = "..."]`.

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Open,
    Close,
    Semi,
    Comma,
    Star,
    Str(String),
    /// Any other punctuation (a `$` before `crate` in a macro, `#`, `[`, `=`...).
    Punct(char),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub line: u32,
}

pub fn tokens(src: &str) -> Vec<Token> {
    let mut lexer = Lexer {
        chars: src.chars().collect(),
        at: 0,
        line: 1,
        out: Vec::new(),
    };
    lexer.run();
    lexer.out
}

struct Lexer {
    chars: Vec<char>,
    at: usize,
    line: u32,
    out: Vec<Token>,
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.at += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn push(&mut self, tok: Tok, line: u32) {
        self.out.push(Token { tok, line });
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            let line = self.line;
            match c {
                '/' if self.peek(1) == Some('/') => self.line_comment(),
                '/' if self.peek(1) == Some('*') => self.block_comment(),
                '"' => {
                    let s = self.string();
                    self.push(Tok::Str(s), line);
                }
                '\'' => self.quote(),
                'r' | 'b' if self.raw_or_byte_literal() => {}
                c if c == '_' || c.is_alphanumeric() => {
                    let word = self.word();
                    self.push(Tok::Ident(word), line);
                }
                ':' if self.peek(1) == Some(':') => {
                    self.at += 2;
                    self.push(Tok::PathSep, line);
                }
                c => {
                    self.bump();
                    let tok = match c {
                        '{' => Tok::Open,
                        '}' => Tok::Close,
                        ';' => Tok::Semi,
                        ',' => Tok::Comma,
                        '*' => Tok::Star,
                        c if c.is_whitespace() => continue,
                        c => Tok::Punct(c),
                    };
                    self.push(tok, line);
                }
            }
        }
    }

    fn word(&mut self) -> String {
        let mut w = String::new();
        while let Some(c) = self.peek(0).filter(|c| *c == '_' || c.is_alphanumeric()) {
            w.push(c);
            self.at += 1;
        }
        w
    }

    fn line_comment(&mut self) {
        while self.peek(0).is_some_and(|c| c != '\n') {
            self.at += 1;
        }
    }

    /// Block comments nest in Rust.
    fn block_comment(&mut self) {
        let mut depth = 0;
        while let Some(c) = self.bump() {
            if c == '/' && self.peek(0) == Some('*') {
                self.bump();
                depth += 1;
            } else if c == '*' && self.peek(0) == Some('/') {
                self.bump();
                depth -= 1;
                if depth == 0 {
                    return;
                }
            }
        }
    }

    /// A `"..."` literal, escapes taken as they are (only `#[path]` reads it).
    fn string(&mut self) -> String {
        self.bump();
        let mut s = String::new();
        while let Some(c) = self.bump() {
            match c {
                '\\' => {
                    self.bump();
                }
                '"' => break,
                c => s.push(c),
            }
        }
        s
    }

    /// A character literal (`'x'`, `'\n'`, `'\u{1F600}'`) or a lifetime
    /// (`'a`), both dropped.
    fn quote(&mut self) {
        self.bump();
        if self.peek(0) == Some('\\') {
            while let Some(c) = self.bump() {
                if c == '\\' {
                    self.bump();
                } else if c == '\'' {
                    return;
                }
            }
        } else if self.peek(1) == Some('\'') {
            self.at += 2;
        } else {
            self.word();
        }
    }

    /// `r"..."`, `r#"..."#`, `b"..."`, `br"..."`, `b'x'` and raw identifiers
    /// (`r#type`); false when the `r` or `b` starts a plain word.
    fn raw_or_byte_literal(&mut self) -> bool {
        let line = self.line;
        let (prefix, raw) = match (self.peek(0), self.peek(1), self.peek(2)) {
            (Some('b'), Some('r'), Some('"' | '#')) => (2, true),
            (Some('r'), Some('#'), Some(c)) if c == '_' || c.is_alphabetic() => {
                self.at += 2;
                let word = self.word();
                self.push(Tok::Ident(word), line);
                return true;
            }
            (Some('r'), Some('"' | '#'), _) => (1, true),
            (Some('b'), Some('"'), _) => (1, false),
            (Some('b'), Some('\''), _) => {
                self.at += 1;
                self.quote();
                return true;
            }
            _ => return false,
        };
        self.at += prefix;
        if !raw {
            let s = self.string();
            self.push(Tok::Str(s), line);
            return true;
        }
        let mut hashes = 0;
        while self.peek(0) == Some('#') {
            hashes += 1;
            self.at += 1;
        }
        self.bump(); // the opening quote
        let mut s = String::new();
        while let Some(c) = self.bump() {
            if c == '"' && (0..hashes).all(|k| self.peek(k) == Some('#')) {
                self.at += hashes;
                break;
            }
            s.push(c);
        }
        self.push(Tok::Str(s), line);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(src: &str) -> Vec<String> {
        tokens(src)
            .into_iter()
            .filter_map(|t| match t.tok {
                Tok::Ident(w) => Some(w),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn comments_strings_and_lifetimes_are_no_paths() {
        let src = r##"
            // crate::a::b in a comment
            /* crate::c /* nested crate::d */ still a comment */
            /// [`crate::e`]
            fn f<'a>(x: &'a str) -> char { let _ = "crate::g"; let _ = r#"crate::h"#; '\'' }
            let c = 'x'; let b = b'y'; let r#type = br"crate::i";
        "##;
        assert_eq!(
            idents(src),
            [
                "fn", "f", "x", "str", "char", "let", "_", "let", "_", "let", "c", "let", "b",
                "let", "type"
            ]
        );
    }

    #[test]
    fn lines_are_counted() {
        let t = tokens("use a;\n/* x\n y */\nuse b;");
        let b = t.iter().find(|t| t.tok == Tok::Ident("b".into())).unwrap();
        assert_eq!(b.line, 4);
    }
}
