//! One self-contained HTML page (pydarshan's job summary is the model): the
//! headline figures first, then sections of figures, tables and notes. It
//! opens offline and can be mailed: its style is inline, its figures are
//! SVG drawn into the page ([`crate::canvas::svg_string`]), and it has no
//! script, no web font and no link it would fetch; a Content-Security-Policy
//! says so to the browser too. Every text is escaped; only the figures'
//! markup goes in as it is.

use crate::canvas::SVG_NAMESPACE;

/// What a page holds below its headline, in order.
#[derive(Debug, Clone)]
enum Block {
    Section(String),
    Pre(String),
    Figure { svg: String, caption: String },
    Table(Table),
    Note(String),
}

#[derive(Debug, Clone)]
struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// A page being built; [`Page::render`] writes it out.
#[derive(Debug, Clone)]
pub struct Page {
    title: String,
    headline: Vec<(String, String)>,
    blocks: Vec<Block>,
}

/// Nothing is fetched, nothing runs: inline style, and images only from
/// the page itself (inline SVG needs no source at all).
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// System fonts only: a web font would be a fetch.
const STYLE: &str = r#"
:root { color-scheme: light; }
body { margin: 0 auto; max-width: 1240px; padding: 24px 28px 48px;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: #1d2330; background: #fff; }
h1 { font-size: 26px; margin: 0 0 16px; word-break: break-all; }
h2 { font-size: 19px; margin: 34px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #d8dde6; }
.headline { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 10px; margin: 0 0 8px; }
@media (max-width: 700px) { .headline { grid-template-columns: repeat(2, minmax(0, 1fr)); } }
.figure-box { border: 1px solid #d8dde6; border-radius: 6px; padding: 10px 14px; background: #f6f8fb; }
.figure-box .value { display: block; font-size: 24px; font-weight: 600; font-variant-numeric: tabular-nums; white-space: nowrap; }
.figure-box .label { display: block; font-size: 13px; color: #5a6475; }
pre { background: #f6f8fb; border: 1px solid #d8dde6; border-radius: 6px; padding: 10px 14px;
  font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  white-space: pre-wrap; overflow-wrap: anywhere; }
figure { margin: 12px 0 20px; }
figure svg { display: block; max-width: 100%; height: auto; border: 1px solid #e3e7ee; }
figcaption { font-size: 13px; color: #5a6475; margin-top: 6px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 12px; border-bottom: 1px solid #e3e7ee; text-align: left; vertical-align: top; }
th { background: #eef1f6; font-weight: 600; }
tbody tr:nth-child(even) { background: #fafbfd; }
td.num, th.num { text-align: right; white-space: nowrap; }
p.note { color: #5a6475; font-size: 13px; }
"#;

impl Page {
    pub fn new(title: impl Into<String>) -> Page {
        Page {
            title: title.into(),
            headline: Vec::new(),
            blocks: Vec::new(),
        }
    }

    /// Big figures at the top of the page, under its title, whenever they
    /// are added: `(label, value)`.
    pub fn headline<L: AsRef<str>, V: AsRef<str>>(&mut self, figures: &[(L, V)]) -> &mut Self {
        self.headline.extend(
            figures
                .iter()
                .map(|(l, v)| (l.as_ref().to_string(), v.as_ref().to_string())),
        );
        self
    }

    /// Starts a section: what follows until the next one is under its title.
    pub fn section(&mut self, title: &str) -> &mut Self {
        self.blocks.push(Block::Section(title.to_string()));
        self
    }

    /// A monospace block, kept as written (a verdict, a command line).
    pub fn pre(&mut self, text: &str) -> &mut Self {
        self.blocks.push(Block::Pre(text.to_string()));
        self
    }

    /// A figure: an SVG document as [`crate::canvas::svg_string`] draws it,
    /// inlined as it is (not escaped), with a caption under it.
    pub fn figure(&mut self, svg: String, caption: &str) -> &mut Self {
        self.blocks.push(Block::Figure {
            svg,
            caption: caption.to_string(),
        });
        self
    }

    /// A table; columns whose cells all start with a number are aligned right.
    pub fn table(&mut self, headers: &[&str], rows: Vec<Vec<String>>) -> &mut Self {
        self.blocks.push(Block::Table(Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows,
        }));
        self
    }

    /// A short paragraph in small print.
    pub fn note(&mut self, text: &str) -> &mut Self {
        self.blocks.push(Block::Note(text.to_string()));
        self
    }

    /// The whole page, one HTML document.
    pub fn render(&self) -> String {
        let mut s = String::with_capacity(
            4096 + self
                .blocks
                .iter()
                .map(|b| match b {
                    Block::Figure { svg, .. } => svg.len(),
                    _ => 256,
                })
                .sum::<usize>(),
        );
        s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        s.push_str(&format!(
            "<meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">\n"
        ));
        s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        s.push_str(&format!("<title>{}</title>\n", escape(&self.title)));
        s.push_str(&format!("<style>{STYLE}</style>\n</head>\n<body>\n"));
        s.push_str(&format!("<h1>{}</h1>\n", escape(&self.title)));
        if !self.headline.is_empty() {
            s.push_str("<div class=\"headline\">\n");
            for (label, value) in &self.headline {
                s.push_str(&format!(
                    "<div class=\"figure-box\"><span class=\"value\">{}</span><span class=\"label\">{}</span></div>\n",
                    escape(value),
                    escape(label)
                ));
            }
            s.push_str("</div>\n");
        }
        let mut open = false;
        for b in &self.blocks {
            match b {
                Block::Section(title) => {
                    if open {
                        s.push_str("</section>\n");
                    }
                    open = true;
                    s.push_str(&format!("<section>\n<h2>{}</h2>\n", escape(title)));
                }
                Block::Pre(text) => s.push_str(&format!("<pre>{}</pre>\n", escape(text))),
                Block::Figure { svg, caption } => s.push_str(&format!(
                    "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
                    svg.trim(),
                    escape(caption)
                )),
                Block::Table(t) => render_table(&mut s, t),
                Block::Note(text) => {
                    s.push_str(&format!("<p class=\"note\">{}</p>\n", escape(text)))
                }
            }
        }
        if open {
            s.push_str("</section>\n");
        }
        s.push_str("</body>\n</html>\n");
        s
    }
}

fn render_table(s: &mut String, t: &Table) {
    let numeric: Vec<bool> = (0..t.headers.len())
        .map(|c| {
            let mut cells = t.rows.iter().filter_map(|r| r.get(c));
            cells.clone().next().is_some() && cells.all(|v| starts_with_number(v))
        })
        .collect();
    let class = |c: usize| {
        if numeric.get(c).copied().unwrap_or(false) {
            " class=\"num\""
        } else {
            ""
        }
    };
    s.push_str("<table>\n<thead><tr>");
    for (c, h) in t.headers.iter().enumerate() {
        s.push_str(&format!("<th{}>{}</th>", class(c), escape(h)));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        s.push_str("<tr>");
        for (c, v) in row.iter().enumerate() {
            s.push_str(&format!("<td{}>{}</td>", class(c), escape(v)));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
}

/// `12`, `-0.5`, `3.2 GiB`: a figure, which reads best aligned right.
fn starts_with_number(v: &str) -> bool {
    let v = v.strip_prefix(['-', '+']).unwrap_or(v);
    v.starts_with(|c: char| c.is_ascii_digit())
}

/// `text` safe anywhere in HTML's text and in quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&#39;"),
            c => s.push(c),
        }
    }
    s
}

/// What in a rendered page could make a browser fetch something: an
/// absolute URL (`scheme://`), a `src=` or `href=` attribute, a CSS `url(`
/// or `@import`; the namespace its figures declare (`xmlns`, a name, never
/// fetched) aside. Empty for a page that fetches nothing: for tests.
pub fn fetches(html: &str) -> Vec<String> {
    let declared = format!("xmlns=\"{SVG_NAMESPACE}\"");
    let lower = html.to_ascii_lowercase().replace(&declared, "");
    let delimiter = |c: char| c.is_whitespace() || "\"'<>&()".contains(c);
    let mut found = Vec::new();
    for marker in ["://", "src=", "href=", "url(", "@import"] {
        for (at, _) in lower.match_indices(marker) {
            let start = lower[..at].rfind(delimiter).map_or(0, |i| i + 1);
            let after = at + marker.len();
            let end = lower[after..]
                .find(delimiter)
                .map_or(lower.len(), |i| i + after);
            found.push(lower[start..end].to_string());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canvas::{DrawResult, Figure};
    use plotters::coord::Shift;
    use plotters::prelude::*;

    struct Square;

    impl Figure for Square {
        fn size(&self) -> (u32, u32) {
            (120, 80)
        }
        fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
        where
            DB::ErrorType: 'static,
        {
            root.fill(&WHITE)?;
            root.draw(&Rectangle::new([(10, 10), (60, 60)], BLUE.filled()))?;
            root.draw(&Text::new(
                "a <b> & \"c\"",
                (10, 70),
                (crate::canvas::FONT, 12),
            ))?;
            Ok(())
        }
    }

    fn hostile() -> &'static str {
        r#"<script>alert('x')</script> & "q" <img src=http://example.com/x.png>"#
    }

    fn page() -> Page {
        let svg = crate::canvas::svg_string(&Square).unwrap();
        let mut p = Page::new(format!("job {}", hostile()));
        p.section("Timeline")
            .figure(svg, hostile())
            .section(hostile())
            .pre(hostile())
            .table(
                &["kind", "bytes <read>"],
                vec![
                    vec!["load".into(), "1.00 GiB".into()],
                    vec![hostile().into(), "-3".into()],
                ],
            )
            .note(hostile())
            .headline(&[
                ("events <all>", "1233".to_string()),
                (hostile(), hostile().to_string()),
            ]);
        p
    }

    #[test]
    fn escapes_the_five_characters() {
        assert_eq!(
            escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("plain text, 1.5 GiB/s"), "plain text, 1.5 GiB/s");
        assert_eq!(
            escape("&amp;"),
            "&amp;amp;",
            "escaped once more, not taken as escaped"
        );
    }

    #[test]
    fn every_text_is_escaped_and_nothing_runs_or_is_fetched() {
        let html = page().render();
        assert!(!html.to_ascii_lowercase().contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
        assert!(
            html.contains("<th>kind</th><th class=\"num\">bytes &lt;read&gt;</th>"),
            "{html}"
        );
        // The figure's own text is escaped by plotters.
        assert!(html.contains("a &lt;b&gt; &amp;"), "{html}");
        // Only the escaped hostile text names a URL; the SVG's namespace is allowed.
        assert!(html.contains(&format!("xmlns=\"{SVG_NAMESPACE}\"")));
        let found = fetches(&html);
        assert!(!found.is_empty());
        assert!(
            found.iter().all(|u| u == "src=http://example.com/x.png"),
            "{found:?}"
        );
        let clean = Page::new("t")
            .headline(&[("a", "1")])
            .figure(crate::canvas::svg_string(&Square).unwrap(), "c")
            .render();
        assert_eq!(fetches(&clean), Vec::<String>::new(), "{clean}");
        assert!(clean.contains("Content-Security-Policy"));
    }

    #[test]
    fn headline_first_then_blocks_in_order_and_numbers_right() {
        let html = page().render();
        let at = |needle: &str| {
            html.find(needle)
                .unwrap_or_else(|| panic!("`{needle}` missing: {html}"))
        };
        assert!(at("<h1>") < at("class=\"headline\""));
        assert!(at("events &lt;all&gt;") < at("<h2>Timeline</h2>"));
        assert!(at("<h2>Timeline</h2>") < at("<svg"));
        assert!(at("<svg") < at("<pre>"));
        assert!(at("<pre>") < at("<table>"));
        assert!(at("<table>") < at("<p class=\"note\">"));
        assert_eq!(html.matches("<section>").count(), 2);
        assert_eq!(html.matches("</section>").count(), 2);
        assert!(html.contains("<td class=\"num\">1.00 GiB</td>"), "{html}");
        assert!(html.contains("<td>load</td>"), "{html}");
    }
}
