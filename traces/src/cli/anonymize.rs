//! `anonymize`: a trace with every name hashed under the owner's key, to
//! hand to another team (see `iorepro_analysis::anonymize`).

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use super::inspect::json_line;
use iorepro_format::keyed_names::Key;

pub(super) fn anonymize(
    out: &mut dyn Write,
    trace: &Path,
    dir: &Path,
    key_file: &Path,
    keep_program_name: bool,
    json: bool,
) -> Result<()> {
    let key = Key::load(key_file)?;
    let r = iorepro_analysis::anonymize::anonymize(trace, dir, &key, keep_program_name)?;
    if json {
        return json_line(
            out,
            &serde_json::json!({
                "out": dir,
                "events": r.events,
                "names": r.names,
                "hosts": r.hosts,
                "anonymized": r.manifest.anonymized,
            }),
        );
    }
    writeln!(
        out,
        "{}: {} events, {} names and {} hosts hashed ({}); keep {} to yourself: \
         the same key hashes the same names, and opens them to whoever holds it",
        dir.display(),
        r.events,
        r.names,
        r.hosts,
        iorepro_format::keyed_names::SCHEME,
        key_file.display()
    )?;
    Ok(())
}
