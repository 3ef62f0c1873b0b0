//! A text table for the terminal and `summary.txt`: the one layout every table of a
//! bench run uses.

/// A text table: first column left-aligned, the others right-aligned.
pub struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headings.
    pub fn new(head: Vec<String>) -> Self {
        Table {
            head,
            rows: Vec::new(),
        }
    }

    /// Add a row.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// True if the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row, under a heading line.
    pub fn render(&self) -> String {
        let n = self.head.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.head).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut s = String::new();
        for r in std::iter::once(&self.head).chain(&self.rows) {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate().take(n) {
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    line += c;
                    line += &" ".repeat(pad);
                } else {
                    line += "  ";
                    line += &" ".repeat(pad);
                    line += c;
                }
            }
            s += line.trim_end();
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns() {
        let mut t = Table::new(vec!["a".into(), "bb".into()]);
        t.push(vec!["long".into(), "1".into()]);
        assert_eq!(t.render(), "a     bb\nlong   1\n");
    }
}
