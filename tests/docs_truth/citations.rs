//! Every section the code and the docs cite by name exists: `docs/guides/idempotency.md, "Idempotency"`,
//! `docs/DESIGN.md, "The write path"`, `docs/BENCHMARKS.md ("Load curve")`,
//! `docs/PRODUCTION.md, section 2`, in comments, strings and pages anywhere in the repository
//! (but migrations/, which are history).

use std::fs;
use std::path::Path;

use crate::markdown::{headings, pages, repo};

/// What a citation names: a section's title, or a numbered section.
#[derive(Debug)]
enum Cited {
    Title(String),
    Number(String),
}

/// A citation found: where it is, the file it names and what it names there.
#[derive(Debug)]
struct Citation {
    at: String,
    file: String,
    cited: Cited,
}

/// The citations in `text`: a page's name — `README`, or a path ending `.md`, from the root
/// or from the citing file's folder — then `, "Title"`, ` "Title"`, ` ("Title"`, or
/// `, section N`; the quotes may be escaped (`\"`, inside a Rust string) and a comment may
/// break the line between the name and the title (`,` then `// "Title"` on the next line).
fn citations_in(path: &str, text: &str) -> Vec<Citation> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "./_-".contains(c);
    let ends = text
        .match_indices(".md")
        .map(|(i, _)| i + 3)
        .chain(text.match_indices("README").map(|(i, _)| i + 6))
        .filter(|&end| !text[end..].starts_with(|c: char| c.is_alphanumeric() || c == '.'));
    let mut found = Vec::new();
    for end in ends {
        let start = text[..end]
            .rfind(|c: char| !is_path_char(c))
            .map_or(0, |i| i + 1);
        let name = &text[start..end];
        let file = match name {
            "README" | "README.md" => "README.md".to_string(),
            _ if name.ends_with(".md") => resolve(path, name),
            _ => continue,
        };
        let Some(cited) = cited_after(&text[end..]) else {
            continue;
        };
        let line = text[..start].matches('\n').count() + 1;
        found.push((
            start,
            Citation {
                at: format!("{path}:{line}"),
                file,
                cited,
            },
        ));
    }
    found.sort_by_key(|(start, _)| *start);
    found.into_iter().map(|(_, citation)| citation).collect()
}

/// A cited page's path from the root: as written, or else from the citing file's folder.
fn resolve(citing: &str, name: &str) -> String {
    if repo().join(name).exists() {
        return name.to_string();
    }
    let beside = Path::new(citing)
        .parent()
        .unwrap_or(Path::new(""))
        .join(name);
    if repo().join(&beside).exists() {
        return beside.display().to_string();
    }
    name.to_string()
}

/// What the text right after a file's name cites, if it cites a section.
fn cited_after(rest: &str) -> Option<Cited> {
    let rest = rest
        .strip_prefix(", ")
        .or_else(|| rest.strip_prefix(" ("))
        .or_else(|| rest.strip_prefix(",\n"))
        .or_else(|| rest.strip_prefix(' '))?;
    // A comment's continuation on the next line.
    let rest = rest.trim_start();
    let rest = ["//!", "///", "//", "--", "#", "*"]
        .iter()
        .find_map(|marker| rest.strip_prefix(marker))
        .map_or(rest, str::trim_start);
    if let Some(number) = rest.strip_prefix("section ") {
        let digits: String = number.chars().take_while(char::is_ascii_digit).collect();
        return (!digits.is_empty()).then_some(Cited::Number(digits));
    }
    let (quote, rest) = if let Some(r) = rest.strip_prefix("\\\"") {
        ("\\\"", r)
    } else {
        ("\"", rest.strip_prefix('"')?)
    };
    let title = &rest[..rest.find(quote)?];
    (!title.contains('\n') && !title.is_empty()).then(|| Cited::Title(title.to_string()))
}

/// The names a file's sections answer to: each heading whole, and without what only
/// labels or extends it — its number (`2. The database: …`), its issue (`Memory of serve
/// (#27)`), its subtitle after `: ` — and each paragraph's or item's bold lead
/// (`**A key's life.**`), which the long pages use as the title of a part of a section.
fn section_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for heading in headings(text) {
        let whole = heading.title;
        let unnumbered = match whole.split_once(". ") {
            Some((n, rest)) if n.chars().all(|c| c.is_ascii_digit()) => rest.to_string(),
            _ => whole.clone(),
        };
        for cut in [": ", " ("] {
            if let Some((head, _)) = unnumbered.split_once(cut) {
                names.push(head.to_string());
            }
        }
        if let Some(untagged) = unnumbered
            .strip_suffix(')')
            .and_then(|t| t.rsplit_once(" (#"))
            .map(|(head, _)| head)
        {
            names.push(untagged.to_string());
        }
        names.push(unnumbered);
        names.push(whole);
    }
    for line in text.lines() {
        let line = line.trim_start();
        let line = line.strip_prefix("- ").unwrap_or(line);
        if let Some(bold) = line.strip_prefix("**").and_then(|l| l.split_once(".**")) {
            names.push(bold.0.to_string());
        }
    }
    names
}

/// The numbers of a file's numbered sections (`## 2. The database: …`).
fn section_numbers(text: &str) -> Vec<String> {
    headings(text)
        .into_iter()
        .filter_map(|h| Some(h.title.split_once(". ")?.0.to_string()))
        .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
        .collect()
}

/// Where citations are looked for: every text file of the repository (code and its comments,
/// the pages' scripts, tests, scripts, the pages themselves), but build output (`target/`),
/// fuzz corpora, hidden folders other than `.ci/`, and migrations/: a migration is never
/// edited once shipped, so its comments cite the docs as they were.
fn cited_from() -> Vec<(String, String)> {
    fn walk(dir: &Path, found: &mut Vec<(String, String)>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(repo()).unwrap_or(&path).to_path_buf();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                let skipped = (name.starts_with('.') && name != ".ci")
                    || ["target", "corpus"].contains(&name.as_str())
                    || relative == Path::new("migrations");
                if !skipped {
                    walk(&path, found);
                }
            } else if let Ok(text) = fs::read_to_string(&path) {
                found.push((relative.display().to_string(), text));
            }
        }
    }
    let mut found = Vec::new();
    walk(repo(), &mut found);
    found.sort();
    found
}

#[test]
fn every_cited_section_exists() {
    let mut problems = Vec::new();
    let mut count = 0;
    for (path, text) in cited_from() {
        for citation in citations_in(&path, &text) {
            count += 1;
            let Ok(target) = fs::read_to_string(repo().join(&citation.file)) else {
                problems.push(format!(
                    "{}: cites {}, which does not exist: cite the page the section is on now",
                    citation.at, citation.file
                ));
                continue;
            };
            match &citation.cited {
                Cited::Title(title) if !section_names(&target).contains(title) => {
                    problems.push(format!(
                        "{}: cites {}, \"{title}\", which has no such section: cite one of its \
                         headings, or correct the heading",
                        citation.at, citation.file
                    ))
                }
                Cited::Number(n) if !section_numbers(&target).contains(n) => {
                    problems.push(format!(
                        "{}: cites {}, section {n}, which has no heading numbered {n}",
                        citation.at, citation.file
                    ))
                }
                _ => {}
            }
        }
    }
    assert!(count > 100, "citations not found: {count}");
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// A page's pointers to its own sections, `(see "Overload")`, name one of them.
#[test]
fn every_section_a_page_points_to_is_on_it() {
    let mut problems = Vec::new();
    for page in pages() {
        let names = section_names(&page.text);
        for (i, _) in page.text.match_indices("see \"") {
            let rest = &page.text[i + 5..];
            let Some(title) = rest.split('"').next().filter(|t| !t.contains('\n')) else {
                continue;
            };
            if !names.iter().any(|name| name == title) {
                let line = page.text[..i].matches('\n').count() + 1;
                problems.push(format!(
                    "{}:{line}: see \"{title}\": {} has no such section; point to one of its \
                     headings, or name the page it is on",
                    page.path, page.path
                ));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn a_citation_is_read_in_each_of_its_forms() {
    let text = "README, \"Layout\"; docs/BENCHMARKS.md (\"Load curve\"), \
                docs/PRODUCTION.md, section 2; in a string: README, \\\"The checkout page\\\"; \
                docs/DESIGN.md,\n    // \"Failover\"; README \"Layout\"; README alone; docs/DESIGN.md, which; \
                READMEs; fixtures/contracts/README.md, \"Regenerate\"; x.mdx, \"No\"";
    let found: Vec<String> = citations_in("x", text)
        .into_iter()
        .map(|c| format!("{} {:?}", c.file, c.cited))
        .collect();
    assert_eq!(
        found,
        [
            "README.md Title(\"Layout\")",
            "docs/BENCHMARKS.md Title(\"Load curve\")",
            "docs/PRODUCTION.md Number(\"2\")",
            "README.md Title(\"The checkout page\")",
            "docs/DESIGN.md Title(\"Failover\")",
            "README.md Title(\"Layout\")",
            "fixtures/contracts/README.md Title(\"Regenerate\")",
        ]
    );
}
