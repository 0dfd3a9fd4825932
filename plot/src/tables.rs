//! Tables of what the analysis found in a trace, as a [`Page`] shows
//! them: one spelling for the trace's report and the replay's.

use iorepro_analysis::roles::FileRoles;
use iorepro_format::mounts::UNKNOWN_MOUNT;
use iorepro_format::units::fmt_bytes;

use super::page::Page;

/// The trace's files per role and the mount they were on, as `iorepro-trace
/// files` judges them, under the section `title`.
pub fn files_by_role_and_mount(page: &mut Page, title: &str, roles: &FileRoles) {
    let rows = roles
        .per_role_and_mount()
        .into_iter()
        .map(|r| {
            let mount = if r.fs_type == UNKNOWN_MOUNT {
                r.mount_point
            } else {
                format!("{} ({})", r.mount_point, r.fs_type)
            };
            vec![
                r.role.as_str().to_string(),
                mount,
                r.totals.files.to_string(),
                r.totals.directories.to_string(),
                fmt_bytes(r.totals.read_bytes as f64),
                fmt_bytes(r.totals.write_bytes as f64),
                r.totals.calls.to_string(),
            ]
        })
        .collect();
    page.section(title).table(
        &[
            "role",
            "mount",
            "files",
            "directories",
            "read",
            "written",
            "calls",
        ],
        rows,
    );
}
