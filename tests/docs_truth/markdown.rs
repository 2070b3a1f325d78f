//! The documentation read as text: the README and every page under docs/, their sections,
//! tables and code spans. Just enough Markdown for the tables and lists the docs keep, so a
//! check can say the file and line of what it reads.

use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A documentation page: its path from the repository's root and its text.
pub struct Page {
    pub path: String,
    pub text: String,
}

/// README.md and every `.md` under docs/, in a stable order.
pub fn pages() -> Vec<Page> {
    let mut paths = vec![repo().join("README.md")];
    markdown_under(&repo().join("docs"), &mut paths);
    paths.sort();
    paths.into_iter().map(|path| read_page(&path)).collect()
}

/// One file of the repository, by its path from the root.
pub fn page(relative: &str) -> Page {
    read_page(&repo().join(relative))
}

fn read_page(path: &Path) -> Page {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let path = path
        .strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string();
    Page { path, text }
}

fn markdown_under(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            markdown_under(&path, found);
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
}

/// A heading, outside fenced code: its level (the number of `#`), title and line (from 1).
pub struct Heading {
    pub level: usize,
    pub title: String,
    pub line: usize,
}

pub fn headings(text: &str) -> Vec<Heading> {
    outside_fences(text)
        .filter_map(|(line, content)| {
            let level = content.chars().take_while(|c| *c == '#').count();
            let title = content.get(level..)?.strip_prefix(' ')?;
            (1..=6).contains(&level).then(|| Heading {
                level,
                title: title.trim().to_string(),
                line,
            })
        })
        .collect()
}

/// The lines (numbered from 1) that are not inside a fenced code block, fences excluded.
fn outside_fences(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    text.lines().enumerate().filter_map(move |(i, line)| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return None;
        }
        (!fenced).then_some((i + 1, line))
    })
}

/// A section: the text under a heading up to the next heading of its level or above, with
/// the line its first line has.
pub struct Section<'a> {
    pub text: &'a str,
    pub first_line: usize,
}

/// The section of `page` titled `title`, if it has one.
pub fn section<'a>(page: &'a Page, title: &str) -> Option<Section<'a>> {
    let all = headings(&page.text);
    let at = all.iter().position(|h| h.title == title)?;
    let start = all[at].line;
    let end = all[at + 1..]
        .iter()
        .find(|h| h.level <= all[at].level)
        .map(|h| h.line - 1);
    let lines: Vec<&str> = page.text.lines().collect();
    let end = end.unwrap_or(lines.len());
    let offset: usize = lines[..start].iter().map(|l| l.len() + 1).sum();
    let length: usize = lines[start..end].iter().map(|l| l.len() + 1).sum();
    let text = &page.text[offset.min(page.text.len())..(offset + length).min(page.text.len())];
    Some(Section {
        text,
        first_line: start + 1,
    })
}

/// A pipe table: its header's cells and each row's, with the row's line.
pub struct Table {
    pub line: usize,
    pub header: Vec<String>,
    pub rows: Vec<Row>,
}

pub struct Row {
    pub line: usize,
    pub cells: Vec<String>,
}

/// Every table of `text`; `first_line` is the line `text` starts at in its file.
pub fn tables(text: &str, first_line: usize) -> Vec<Table> {
    let mut found: Vec<Table> = Vec::new();
    let mut in_table = false;
    let lines: Vec<(usize, &str)> = outside_fences(text).collect();
    for (i, (line, content)) in lines.iter().enumerate() {
        let content = content.trim();
        let is_row = content.starts_with('|');
        let next_is_rule = lines
            .get(i + 1)
            .is_some_and(|(_, next)| next.trim().starts_with("|---"));
        if is_row && !in_table && next_is_rule {
            found.push(Table {
                line: line + first_line - 1,
                header: cells(content),
                rows: Vec::new(),
            });
            in_table = true;
        } else if is_row && in_table {
            if !content.starts_with("|---") {
                let table = found.last_mut().expect("a table started");
                table.rows.push(Row {
                    line: line + first_line - 1,
                    cells: cells(content),
                });
            }
        } else {
            in_table = false;
        }
    }
    found
}

/// The cells of a table row: split on `|`, but not on `\|` nor inside a code span.
fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut in_code = false;
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push('|');
                chars.next();
            }
            '`' => {
                in_code = !in_code;
                cells.last_mut().unwrap().push(c);
            }
            '|' if !in_code => cells.push(String::new()),
            _ => cells.last_mut().unwrap().push(c),
        }
    }
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

/// Every table of every page whose header is `header` (compared without case), with the
/// page it is on.
pub fn tables_headed<'a>(pages: &'a [Page], header: &[&str]) -> Vec<(&'a Page, Table)> {
    pages
        .iter()
        .flat_map(|page| {
            tables(&page.text, 1)
                .into_iter()
                .filter(|t| {
                    t.header.len() == header.len()
                        && t.header
                            .iter()
                            .zip(header)
                            .all(|(a, b)| a.eq_ignore_ascii_case(b))
                })
                .map(move |t| (page, t))
        })
        .collect()
}

/// The code spans of `text` (what is between backticks), in order.
pub fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The indented (four spaces) and fenced code blocks of `text`, each as one string.
pub fn code_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            if fenced {
                blocks.extend(current.take());
            } else {
                current = Some(String::new());
            }
            fenced = !fenced;
            continue;
        }
        let code = if fenced {
            Some(line)
        } else {
            line.strip_prefix("    ")
        };
        match (code, current.as_mut()) {
            (Some(code), _) => {
                let block = current.get_or_insert_with(String::new);
                block.push_str(code);
                block.push('\n');
            }
            // A blank line inside an indented block is part of it.
            (None, Some(block)) if line.trim().is_empty() => block.push('\n'),
            (None, _) => blocks.extend(current.take()),
        }
    }
    blocks.extend(current);
    blocks
}
