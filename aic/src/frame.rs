//! A parquet file's columns in memory: integers, floats and strings (interned), each value
//! possibly null.
//!
//! The database's tables are small (at most about 10⁵ rows of ten columns), flat (no nesting)
//! and written by pandas/pyarrow with ZSTD or Snappy pages; this reads the columns asked for
//! with parquet's column readers (no Arrow) and says in every error which file and column.

use std::collections::HashMap;

use bytes::Bytes;
use parquet::basic::Type as Physical;
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::DataType;
use parquet::file::reader::{FileReader, SerializedFileReader};

/// One column's values.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    /// Indices into the frame's string table.
    Str(Vec<Option<u32>>),
}

impl Column {
    fn len(&self) -> usize {
        match self {
            Column::Int(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Str(v) => v.len(),
        }
    }
}

/// The columns of one file that a reader asked for.
#[derive(Clone, Debug)]
pub struct Frame {
    /// The file's name, for messages.
    pub(crate) file: String,
    pub rows: usize,
    columns: Vec<(String, Column)>,
    strings: Vec<String>,
}

impl Frame {
    /// Reads the columns named in `want` (all of them when empty) of a parquet file's bytes.
    /// A wanted column the file lacks is left out (see [`Frame::has`]); a file that is not
    /// parquet, or a column of a type other than integer, float or string, is an error.
    pub fn read(file: &str, bytes: Vec<u8>, want: &[&str]) -> Result<Frame, crate::Error> {
        let err = |e: parquet::errors::ParquetError| format!("{file}: not a readable parquet file: {e}");
        if bytes.starts_with(b"version https://git-lfs") {
            return Err(
                format!("{file}: is a git-lfs pointer, not the data (run `git lfs pull` where it came from)").into()
            );
        }
        let reader = SerializedFileReader::new(Bytes::from(bytes)).map_err(err)?;
        let meta = reader.metadata();
        let schema = meta.file_metadata().schema_descr();
        let rows =
            usize::try_from(meta.file_metadata().num_rows()).map_err(|_| format!("{file}: negative row count"))?;
        let mut strings = Vec::new();
        let mut interned: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut columns = Vec::new();
        for ci in 0..schema.num_columns() {
            let desc = schema.column(ci);
            let name = desc.name().to_string();
            if !want.is_empty() && !want.contains(&name.as_str()) {
                continue;
            }
            if desc.max_rep_level() > 0 {
                return Err(format!("{file}: column {name} is nested (repeated); expected flat columns").into());
            }
            let max_def = desc.max_def_level();
            let mut col = match desc.physical_type() {
                Physical::INT32 | Physical::INT64 => Column::Int(Vec::with_capacity(rows)),
                Physical::FLOAT | Physical::DOUBLE => Column::Float(Vec::with_capacity(rows)),
                Physical::BYTE_ARRAY => Column::Str(Vec::with_capacity(rows)),
                t => {
                    return Err(
                        format!("{file}: column {name} has type {t}; expected integers, floats or strings").into()
                    )
                }
            };
            for rg in 0..reader.num_row_groups() {
                let group = reader.get_row_group(rg).map_err(err)?;
                let reader = group.get_column_reader(ci).map_err(err)?;
                let what = |e: parquet::errors::ParquetError| format!("{file}: column {name}: {e}");
                match (reader, &mut col) {
                    (ColumnReader::Int32ColumnReader(r), Column::Int(v)) => {
                        read_all(r, max_def, |x: &i32| Some(i64::from(*x)), v).map_err(what)?
                    }
                    (ColumnReader::Int64ColumnReader(r), Column::Int(v)) => {
                        read_all(r, max_def, |x: &i64| Some(*x), v).map_err(what)?
                    }
                    (ColumnReader::FloatColumnReader(r), Column::Float(v)) => {
                        read_all(r, max_def, |x: &f32| Some(f64::from(*x)), v).map_err(what)?
                    }
                    (ColumnReader::DoubleColumnReader(r), Column::Float(v)) => {
                        read_all(r, max_def, |x: &f64| Some(*x), v).map_err(what)?
                    }
                    (ColumnReader::ByteArrayColumnReader(r), Column::Str(v)) => {
                        let mut intern = |x: &parquet::data_type::ByteArray| {
                            let b = x.data();
                            if let Some(&i) = interned.get(b) {
                                return Some(i);
                            }
                            let i = strings.len() as u32;
                            strings.push(String::from_utf8_lossy(b).into_owned());
                            interned.insert(b.to_vec(), i);
                            Some(i)
                        };
                        read_all(r, max_def, &mut intern, v).map_err(what)?
                    }
                    _ => return Err(format!("{file}: column {name}: unexpected column reader").into()),
                }
            }
            if col.len() != rows {
                return Err(format!("{file}: column {name} has {} values for {rows} rows", col.len()).into());
            }
            columns.push((name, col));
        }
        Ok(Frame { file: file.to_string(), rows, columns, strings })
    }

    /// Whether the file has the column.
    pub fn has(&self, name: &str) -> bool {
        self.columns.iter().any(|(n, _)| n == name)
    }

    fn column(&self, name: &str) -> Result<&Column, crate::Error> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c).ok_or_else(|| {
            let have: Vec<&str> = self.columns.iter().map(|(n, _)| n.as_str()).collect();
            crate::Error::Table(format!("{}: no column {name} (it has {})", self.file, have.join(", ")))
        })
    }

    /// An integer column; every value must be present.
    pub fn ints(&self, name: &str) -> Result<Vec<i64>, crate::Error> {
        match self.column(name)? {
            Column::Int(v) => v
                .iter()
                .enumerate()
                .map(|(i, x)| x.ok_or_else(|| format!("{}: column {name}, row {i}: empty", self.file).into()))
                .collect(),
            _ => Err(format!("{}: column {name} is not integers", self.file).into()),
        }
    }

    /// A float column (integers are converted); every value must be present.
    pub fn floats(&self, name: &str) -> Result<Vec<f64>, crate::Error> {
        let ok = |i: usize, x: Option<f64>| {
            x.ok_or_else(|| crate::Error::Table(format!("{}: column {name}, row {i}: empty", self.file)))
        };
        match self.column(name)? {
            Column::Float(v) => v.iter().enumerate().map(|(i, x)| ok(i, *x)).collect(),
            Column::Int(v) => v.iter().enumerate().map(|(i, x)| ok(i, x.map(|x| x as f64))).collect(),
            Column::Str(_) => Err(format!("{}: column {name} is strings, not numbers", self.file).into()),
        }
    }

    /// A string column, as indices into [`Frame::string`]; an empty value reads as "".
    pub fn strs(&self, name: &str) -> Result<Vec<&str>, crate::Error> {
        match self.column(name)? {
            Column::Str(v) => Ok(v.iter().map(|x| x.map_or("", |i| self.strings[i as usize].as_str())).collect()),
            _ => Err(format!("{}: column {name} is not strings", self.file).into()),
        }
    }
}

/// Reads every value of one column chunk into `out`, nulls as None.
fn read_all<T: DataType, V>(
    mut r: ColumnReaderImpl<T>,
    max_def: i16,
    mut convert: impl FnMut(&T::T) -> Option<V>,
    out: &mut Vec<Option<V>>,
) -> parquet::errors::Result<()>
where
    T::T: Default + Clone,
{
    const BATCH: usize = 8192;
    let mut values: Vec<T::T> = Vec::with_capacity(BATCH);
    let mut defs: Vec<i16> = Vec::with_capacity(BATCH);
    loop {
        values.clear();
        defs.clear();
        let (records, _, _) = r.read_records(BATCH, (max_def > 0).then_some(&mut defs), None, &mut values)?;
        if records == 0 {
            return Ok(());
        }
        if max_def == 0 {
            out.extend(values.iter().map(&mut convert));
        } else {
            let mut it = values.iter();
            for &d in &defs {
                out.push(if d == max_def { it.next().and_then(&mut convert) } else { None });
            }
        }
    }
}
