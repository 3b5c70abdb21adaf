// Reading a CSV file of labelled examples into a LabelledTable.
//
// The format: a header row naming the columns, then one row per example; fields separated by
// commas, optionally double-quoted (a quote inside a quoted field is written twice); lines end
// with LF or CRLF; blank lines are skipped. Feature fields are decimal numbers (finite). The
// label column holds either non-negative integer class ids or class names; names get ids in
// sorted order (LabelledTable::class_names).
//
// Every error names the file, and where it applies the line (1 is the header), the column and
// the offending text, e.g. "data.csv:17: column 'pixel_3': 'x' is not a number".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"
#include "training/data/labelled_table.h"

namespace lockstep::training {

struct CsvOptions {
  std::string label_column = "label";
  // The feature columns, in this order; empty means every column but the label, in file order.
  std::vector<std::string> feature_columns;
  // Regression: the target columns, numbers like the features; the label column is then not
  // read, and every row's label is 0. Features default to every column but these.
  std::vector<std::string> target_columns;
};

StatusOr<LabelledTable> ReadCsv(const std::string& path, const CsvOptions& options);

// The same, from text already in memory; `source` stands for the file name in messages.
StatusOr<LabelledTable> ParseCsv(std::string_view text, std::string_view source, const CsvOptions& options);

// The pieces of the format, for the streaming input (row_decoder.h), which reads line by line.
// One line's fields, unquoted; `where` ("file:line") prefixes an error.
Status SplitCsvFields(std::string_view line, std::string_view where, std::vector<std::string>& fields);
// A feature field: a finite decimal number, the whole field.
bool ParseCsvNumber(std::string_view field, float& out);
// A label field that is an integer class id (else it is a class name).
bool ParseCsvInteger(std::string_view field, int64_t& out);
// "'text'", cut after 40 characters, for messages.
std::string QuotedForMessage(std::string_view text);

}  // namespace lockstep::training
