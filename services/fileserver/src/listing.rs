//! Optional directory listings (HTML or JSON), read beneath the root with
//! the same openat2 resolve rules as file opens. Off by default.

use crate::config::{Settings, Symlinks};
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::io;

/// Reads directories beneath the root.
#[derive(Debug)]
pub struct Lister {
    root: OwnedFd,
    resolve: ResolveFlags,
}

/// One listed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// File name.
    pub name: String,
    /// Whether it is a directory.
    pub dir: bool,
    /// Size in bytes (files).
    pub size: u64,
    /// Modification time, Unix seconds.
    pub mtime: i64,
}

const MAX_ITEMS: usize = 10_000;

impl Lister {
    /// Opens the root for listing.
    pub fn new(s: &Settings) -> io::Result<Lister> {
        let root = rustix::fs::open(
            &s.root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let resolve = match s.symlinks {
            Symlinks::Deny => ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
            Symlinks::WithinRoot => ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            Symlinks::Follow => ResolveFlags::NO_MAGICLINKS,
        };
        Ok(Lister { root, resolve })
    }

    /// Entries of directory `rel`, sorted, dotfiles hidden unless `dotfiles`.
    pub fn read(&self, rel: &str, dotfiles: bool) -> io::Result<Vec<Item>> {
        let path = if rel.is_empty() { "." } else { rel };
        let fd = rustix::fs::openat2(
            &self.root,
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            self.resolve,
        )?;
        let mut items = Vec::new();
        let dir = rustix::fs::Dir::read_from(&fd)?;
        for ent in dir {
            let ent = ent?;
            let name = ent.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." || (!dotfiles && name.starts_with('.')) {
                continue;
            }
            let Ok(st) =
                rustix::fs::statat(&fd, ent.file_name(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
            items.push(Item {
                name,
                dir: ft == rustix::fs::FileType::Directory,
                size: st.st_size as u64,
                mtime: st.st_mtime,
            });
            if items.len() >= MAX_ITEMS {
                break;
            }
        }
        items.sort_by(|a, b| b.dir.cmp(&a.dir).then_with(|| a.name.cmp(&b.name)));
        Ok(items)
    }
}

fn html_escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// Renders an HTML listing for URL path `/rel/`.
pub fn html(rel: &str, items: &[Item]) -> String {
    let mut s =
        String::from("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of /");
    html_escape(rel, &mut s);
    s.push_str("</title></head><body><h1>Index of /");
    html_escape(rel, &mut s);
    s.push_str("</h1><ul>\n");
    if !rel.is_empty() {
        s.push_str("<li><a href=\"../\">../</a></li>\n");
    }
    for it in items {
        let mut href = Vec::new();
        crate::http::response::push_encoded_path(&mut href, &it.name);
        s.push_str("<li><a href=\"");
        html_escape(&String::from_utf8_lossy(&href), &mut s);
        if it.dir {
            s.push('/');
        }
        s.push_str("\">");
        html_escape(&it.name, &mut s);
        if it.dir {
            s.push('/');
        }
        s.push_str("</a>");
        if !it.dir {
            s.push_str(&format!(" {}", it.size));
        }
        s.push_str("</li>\n");
    }
    s.push_str("</ul></body></html>\n");
    s
}

/// Renders a JSON listing.
pub fn json(items: &[Item]) -> String {
    let v: Vec<serde_json::Value> = items
        .iter()
        .map(|i| {
            serde_json::json!({
                "name": i.name,
                "type": if i.dir { "directory" } else { "file" },
                "size": i.size,
                "mtime": i.mtime,
            })
        })
        .collect();
    let mut s = serde_json::Value::Array(v).to_string();
    s.push('\n');
    s
}
