//! Structure member offsets of the running kernel, read from its BTF
//! (`/sys/kernel/btf/vmlinux`). The kernel-side programs are not relocated, so
//! these offsets are handed to them as globals before they are loaded.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{CollectError, CollectResult};

const BTF_MAGIC: u16 = 0xeb9f;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

struct Member {
    name: u32,
    type_id: u32,
    bit_offset: u32,
}

struct Type {
    name: u32,
    kind: u32,
    /// Pointed-to / aliased type for PTR, TYPEDEF and modifiers.
    ref_type: u32,
    members: Vec<Member>,
    /// Parameters of a FUNC_PROTO.
    params: u32,
}

/// The parsed type graph, enough to find member offsets by name.
pub struct Btf {
    strings: Vec<u8>,
    /// Index = type id (id 0 is `void`).
    types: Vec<Type>,
    structs_by_name: HashMap<String, u32>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl Btf {
    pub fn from_sys_fs() -> CollectResult<Btf> {
        Self::from_file(Path::new("/sys/kernel/btf/vmlinux"))
    }

    pub fn from_file(path: &Path) -> CollectResult<Btf> {
        let data = std::fs::read(path).map_err(|e| CollectError::io(path, e))?;
        Self::parse(&data).ok_or_else(|| {
            CollectError::Kernel(format!("{}: not a readable BTF blob", path.display()))
        })
    }

    fn parse(b: &[u8]) -> Option<Btf> {
        if u16_at(b, 0)? != BTF_MAGIC {
            return None;
        }
        let hdr_len = u32_at(b, 4)? as usize;
        let type_off = hdr_len + u32_at(b, 8)? as usize;
        let type_len = u32_at(b, 12)? as usize;
        let str_off = hdr_len + u32_at(b, 16)? as usize;
        let str_len = u32_at(b, 20)? as usize;
        let strings = b.get(str_off..str_off + str_len)?.to_vec();
        let tb = b.get(type_off..type_off + type_len)?;
        let mut types = vec![Type {
            name: 0,
            kind: 0,
            ref_type: 0,
            members: Vec::new(),
            params: 0,
        }];
        let mut at = 0;
        while at + 12 <= tb.len() {
            let name = u32_at(tb, at)?;
            let info = u32_at(tb, at + 4)?;
            let size_or_type = u32_at(tb, at + 8)?;
            at += 12;
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            let kind_flag = info >> 31 == 1;
            let mut members = Vec::new();
            match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => at += 4,
                KIND_ARRAY => at += 12,
                KIND_STRUCT | KIND_UNION => {
                    for _ in 0..vlen {
                        let off = u32_at(tb, at + 8)?;
                        members.push(Member {
                            name: u32_at(tb, at)?,
                            type_id: u32_at(tb, at + 4)?,
                            bit_offset: if kind_flag { off & 0xff_ffff } else { off },
                        });
                        at += 12;
                    }
                }
                KIND_ENUM | KIND_FUNC_PROTO => at += 8 * vlen,
                KIND_DATASEC | KIND_ENUM64 => at += 12 * vlen,
                _ => {}
            }
            let ref_type = match kind {
                KIND_PTR | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT
                | KIND_TYPE_TAG => size_or_type,
                _ => 0,
            };
            types.push(Type {
                name,
                kind,
                ref_type,
                members,
                params: if kind == KIND_FUNC_PROTO {
                    vlen as u32
                } else {
                    0
                },
            });
        }
        let mut btf = Btf {
            strings,
            types,
            structs_by_name: HashMap::new(),
        };
        for (id, t) in btf.types.iter().enumerate() {
            if t.kind == KIND_STRUCT && t.name != 0 && !t.members.is_empty() {
                let name = btf.str_at(t.name).to_string();
                btf.structs_by_name.entry(name).or_insert(id as u32);
            }
        }
        Some(btf)
    }

    fn str_at(&self, off: u32) -> &str {
        let s = self.strings.get(off as usize..).unwrap_or(&[]);
        let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
        std::str::from_utf8(&s[..end]).unwrap_or("")
    }

    /// Follows typedefs and qualifiers to the underlying type.
    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            let t = &self.types[id as usize];
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.ref_type
                }
                _ => break,
            }
        }
        id
    }

    /// Byte offset and type of `member` in the struct/union `id`, looking
    /// through anonymous structs and unions.
    fn find_member(&self, id: u32, member: &str) -> Option<(u32, u32)> {
        let t = self.types.get(self.resolve(id) as usize)?;
        for m in &t.members {
            if m.name != 0 && self.str_at(m.name) == member {
                return Some((m.bit_offset / 8, m.type_id));
            }
        }
        for m in t.members.iter().filter(|m| m.name == 0) {
            let inner = self.resolve(m.type_id);
            if matches!(self.types[inner as usize].kind, KIND_STRUCT | KIND_UNION) {
                if let Some((off, ty)) = self.find_member(inner, member) {
                    return Some((m.bit_offset / 8 + off, ty));
                }
            }
        }
        None
    }

    /// The parameters of the BTF tracepoint `name` (the `btf_trace_NAME`
    /// typedef the kernel declares for each tracepoint), its leading
    /// `void *` included; `None` when this kernel has no such tracepoint.
    pub fn tracepoint_params(&self, name: &str) -> Option<u32> {
        let wanted = format!("btf_trace_{name}");
        let t = self
            .types
            .iter()
            .find(|t| t.kind == KIND_TYPEDEF && self.str_at(t.name) == wanted)?;
        let ptr = self.types.get(t.ref_type as usize)?;
        let proto = self.types.get(ptr.ref_type as usize)?;
        (proto.kind == KIND_FUNC_PROTO).then_some(proto.params)
    }

    /// Offset of a dotted member path inside a struct, e.g. `("fs_struct",
    /// "pwd.dentry")`; embedded structs only (no pointer hops).
    pub fn offset_of(&self, strukt: &str, path: &str) -> CollectResult<u64> {
        let missing = || CollectError::Kernel(format!("kernel BTF has no member {strukt}.{path}"));
        let mut id = *self.structs_by_name.get(strukt).ok_or_else(missing)?;
        let mut total = 0u64;
        for part in path.split('.') {
            let (off, ty) = self.find_member(id, part).ok_or_else(missing)?;
            total += off as u64;
            id = ty;
        }
        Ok(total)
    }
}

/// The member offsets the kernel-side programs read, by global name.
pub fn kernel_offsets(btf: &Btf) -> CollectResult<Vec<(&'static str, u64)>> {
    use iorepro_common::globals as g;
    let wanted: [(&'static str, &str, &str); 17] = [
        (g::TASK_FILES, "task_struct", "files"),
        (g::TASK_FLAGS, "task_struct", "flags"),
        (g::TASK_FS, "task_struct", "fs"),
        (g::TASK_TGID, "task_struct", "tgid"),
        (g::TASK_PID, "task_struct", "pid"),
        (g::FILES_FDT, "files_struct", "fdt"),
        (g::FDT_MAX_FDS, "fdtable", "max_fds"),
        (g::FDT_FD, "fdtable", "fd"),
        (g::FILE_INODE, "file", "f_inode"),
        (g::FILE_FLAGS, "file", "f_flags"),
        (g::FILE_POS, "file", "f_pos"),
        (g::INODE_MODE, "inode", "i_mode"),
        (g::INODE_INO, "inode", "i_ino"),
        (g::INODE_SB, "inode", "i_sb"),
        (g::SB_DEV, "super_block", "s_dev"),
        (g::FS_PWD_DENTRY, "fs_struct", "pwd.dentry"),
        (g::DENTRY_INODE, "dentry", "d_inode"),
    ];
    let mut offsets = wanted
        .iter()
        .map(|(global, s, m)| Ok((*global, btf.offset_of(s, m)?)))
        .collect::<CollectResult<Vec<_>>>()?;
    let at = |name: &str| {
        offsets
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, o)| *o)
    };
    // The kernel side reads f_inode, f_flags and f_pos with one read of a
    // window of `struct file`, and i_mode, i_sb and i_ino with one read of
    // the head of `struct inode`; this kernel's layout must fit.
    let file_members = [at(g::FILE_INODE), at(g::FILE_FLAGS), at(g::FILE_POS)];
    let window_at = file_members.iter().min().copied().unwrap_or(0) & !7;
    let file_end = file_members.iter().max().copied().unwrap_or(0) + 8;
    let inode_end = [at(g::INODE_MODE), at(g::INODE_INO), at(g::INODE_SB)]
        .iter()
        .max()
        .copied()
        .unwrap_or(0)
        + 8;
    let aligned = at(g::FILE_INODE).is_multiple_of(8)
        && at(g::FILE_POS).is_multiple_of(8)
        && at(g::FILE_FLAGS).is_multiple_of(4)
        && at(g::INODE_INO).is_multiple_of(8)
        && at(g::INODE_SB).is_multiple_of(8)
        && at(g::INODE_MODE).is_multiple_of(2);
    if file_end - window_at > iorepro_common::FILE_WINDOW as u64
        || inode_end > iorepro_common::INODE_WINDOW as u64
        || !aligned
    {
        return Err(CollectError::Kernel(format!(
            "this kernel's struct file / struct inode layout is not supported \
             (f_inode..f_pos spans {} bytes, i_mode..i_ino {} bytes)",
            file_end - window_at,
            inode_end
        )));
    }
    offsets.push((g::FILE_WINDOW_AT, window_at));
    Ok(offsets)
}

/// The io_uring structure offsets the kernel side reads (see its `uring`),
/// or why io_uring requests cannot be followed on this kernel.
pub fn uring_offsets(btf: &Btf) -> Result<Vec<(&'static str, u64)>, String> {
    use iorepro_common::globals as g;
    // A request's command data (`struct io_rw`, `io_open`, ...) begins the
    // request: the union holding it is the first member of `io_kiocb`.
    let cmd = btf
        .offset_of("io_kiocb", "cmd")
        .map_err(|e| format!("{e}"))?;
    let wanted: [(&'static str, &str, &str, u64); 13] = [
        (g::REQ_OPCODE, "io_kiocb", "opcode", 0),
        (g::REQ_FD, "io_kiocb", "cqe.fd", 0),
        (g::RW_POS, "io_rw", "kiocb.ki_pos", cmd),
        (g::RW_ADDR, "io_rw", "addr", cmd),
        (g::RW_LEN, "io_rw", "len", cmd),
        (g::OPEN_DFD, "io_open", "dfd", cmd),
        (g::OPEN_FILENAME, "io_open", "filename", cmd),
        (g::OPEN_FLAGS, "io_open", "how.flags", cmd),
        (g::STATX_DFD, "io_statx", "dfd", cmd),
        (g::STATX_FILENAME, "io_statx", "filename", cmd),
        (g::CLOSE_FD, "io_close", "fd", cmd),
        (g::FILENAME_NAME, "filename", "name", 0),
        (g::CQE_RES, "io_uring_cqe", "res", 0),
    ];
    wanted
        .iter()
        .map(|(global, s, m, base)| {
            btf.offset_of(s, m)
                .map(|o| (*global, base + o))
                .map_err(|e| format!("{e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_of_this_kernel_are_found_and_plausible() {
        let Ok(btf) = Btf::from_sys_fs() else {
            return iorepro_tests::skip::cannot_run("/sys/kernel/btf/vmlinux is not readable here");
        };
        let offs = kernel_offsets(&btf).unwrap();
        assert_eq!(offs.len(), 18);
        // `struct path` is { vfsmount *mnt; dentry *dentry }.
        assert_eq!(btf.offset_of("path", "dentry").unwrap(), 8);
        let tgid = btf.offset_of("task_struct", "tgid").unwrap();
        let pid = btf.offset_of("task_struct", "pid").unwrap();
        assert_eq!(tgid, pid + 4, "pid and tgid are adjacent in task_struct");
        assert!(btf.offset_of("task_struct", "no_such_member").is_err());
        // This kernel has io_uring: its requests are followed.
        let uring = uring_offsets(&btf).unwrap();
        assert_eq!(uring.len(), 13);
    }
}
