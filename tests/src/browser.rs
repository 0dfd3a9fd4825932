//! A page opened in a real browser: headless Chromium, offline, in a fresh
//! profile, its rendered DOM read back as visible text and its first screen
//! saved as a PNG; what the page logs to the console is an error. Every run
//! has a time limit, so a browser that hangs fails the test rather than
//! hanging it. `cargo xtask setup` installs Chromium (the `chromium` package).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's `chromium` package puts the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// How long one run of the browser may take.
pub const LIMIT: Duration = Duration::from_secs(60);

/// The screenshot's window: wide as a laptop's, tall enough for a report's
/// headline, figures and tables.
pub const WINDOW: (u32, u32) = (1280, 3200);

/// Why pages cannot be rendered on this machine, if they cannot.
pub fn missing() -> Option<String> {
    (!Path::new(CHROMIUM).is_file()).then(|| {
        format!("{CHROMIUM} is not installed (`cargo xtask setup` installs the chromium package)")
    })
}

/// Opens `html` in headless Chromium twice: once to read back its rendered
/// DOM, returned as its visible text (tags, the head and styles dropped,
/// entities decoded, whitespace collapsed to single spaces), and once to
/// save a screenshot of [`WINDOW`] to `shot` (a .png). An error says what
/// went wrong: the browser missing, failing or out of time, or a console
/// message of the page (an uncaught error, or a fetch its Content-Security-
/// Policy blocked: a page without scripts that fetches nothing logs none).
/// A fetch that merely fails offline is not logged at this level, so a
/// page that must not fetch says so in its policy, as `iorepro-plot`'s
/// pages do.
pub fn render(html: &Path, shot: &Path) -> Result<String, String> {
    if let Some(why) = missing() {
        return Err(why);
    }
    let html = html
        .canonicalize()
        .map_err(|e| format!("{}: {e}", html.display()))?;
    let url = format!("file://{}", html.display());
    let (dom, _) = chromium(&["--dump-dom".to_string(), url.clone()])?;
    let (_, log) = chromium(&[
        format!("--screenshot={}", shot.display()),
        format!("--window-size={},{}", WINDOW.0, WINDOW.1),
        url,
    ])?;
    if !shot.is_file() {
        return Err(format!(
            "chromium saved no screenshot at {}:\n{log}",
            shot.display()
        ));
    }
    Ok(visible_text(&dom))
}

/// One run of the browser in a fresh profile, offline in all but name (no
/// background fetches, updates or sync): its stdout and log, or an error.
fn chromium(args: &[String]) -> Result<(String, String), String> {
    let profile = tempfile::tempdir().map_err(|e| format!("a browser profile: {e}"))?;
    let stdout = profile.path().join("stdout");
    let stderr = profile.path().join("stderr");
    let file = |p: &PathBuf| File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut cmd = Command::new(CHROMIUM);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!(
        "--user-data-dir={}",
        profile.path().join("profile").display()
    ))
    .args(args)
    .stdin(Stdio::null())
    .stdout(file(&stdout)?)
    .stderr(file(&stderr)?);
    // Its own process group: the browser's helpers (zygote, renderer, GPU
    // process) are ended with it when it runs out of time.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {CHROMIUM}: {e}"))?;
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                // SAFETY: a signal to the process group this call made,
                // whose id is the child's.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                return Err(format!("chromium {args:?} did not finish in {LIMIT:?}"));
            }
            Err(e) => return Err(format!("chromium {args:?}: {e}")),
        }
    };
    let read =
        |p: &PathBuf| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    let (out, log) = (read(&stdout), read(&stderr));
    if !status.success() {
        return Err(format!("chromium {args:?} failed ({status}):\n{log}"));
    }
    let console: Vec<&str> = log.lines().filter(|l| is_console_message(l)).collect();
    if !console.is_empty() {
        return Err(format!(
            "the page logged to the console:\n{}",
            console.join("\n")
        ));
    }
    Ok((out, log))
}

/// A line of Chromium's log that the page wrote to its console (it logs
/// every level as `INFO:CONSOLE`, some builds `ERROR:CONSOLE` or
/// `CONSOLE(line)`), or an uncaught error.
fn is_console_message(line: &str) -> bool {
    line.contains(":CONSOLE") || line.contains("CONSOLE(") || line.contains("Uncaught")
}

/// The text a reader sees of a serialized DOM: the body's text, every tag a
/// space, `<style>`, `<script>` and the head dropped, entities decoded.
pub fn visible_text(dom: &str) -> String {
    let mut s = dom.to_string();
    for tag in ["head", "style", "script"] {
        while let Some(start) = s.find(&format!("<{tag}")) {
            let close = format!("</{tag}>");
            let end = s[start..]
                .find(&close)
                .map_or(s.len(), |i| start + i + close.len());
            s.replace_range(start..end, " ");
        }
    }
    let mut text = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    let decoded = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    decoded.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_text_drops_markup_head_and_styles() {
        let dom = r#"<html><head><title>t</title><style>p { color: red; }</style></head>
<body><h1>Job &amp; its I/O</h1><div><span class="value">1233</span><span>events</span></div>
<script>var x = 1;</script><svg><text x="1">read GiB/s</text></svg><p>a &lt;b&gt;</p></body></html>"#;
        assert_eq!(
            visible_text(dom),
            "Job & its I/O 1233 events read GiB/s a <b>"
        );
    }

    #[test]
    fn console_lines_are_told_from_the_browsers_own_log() {
        assert!(is_console_message(
            r#"[1:1:1202/090509.343567:INFO:CONSOLE:1] "Uncaught ReferenceError: f is not defined", source: file:///tmp/x.html (1)"#
        ));
        assert!(is_console_message(
            r#"[1:1:1202/090509.742122:INFO:CONSOLE:1] "Loading the image 'http://x/y.png' violates the following Content Security Policy directive""#
        ));
        assert!(!is_console_message(
            "[1:2:1202/090504.044510:ERROR:dbus/bus.cc:405] Failed to connect to the bus"
        ));
    }
}
