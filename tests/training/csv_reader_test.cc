#include "training/data/csv_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace lockstep::training {
namespace {

const std::string kDigits = std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/digits.csv";

LabelledTable MustParse(std::string_view text, const CsvOptions& options = {}) {
  StatusOr<LabelledTable> table = ParseCsv(text, "t.csv", options);
  EXPECT_TRUE(table.ok()) << table.status().ToString();
  return table.ok() ? std::move(table).value() : LabelledTable{};
}

std::string CsvErrorOf(std::string_view text, const CsvOptions& options = {}) {
  StatusOr<LabelledTable> table = ParseCsv(text, "t.csv", options);
  EXPECT_FALSE(table.ok()) << "parsed: " << text;
  return table.ok() ? "" : table.status().message();
}

TEST(CsvReaderTest, ReadsTheDigitsDataset) {
  StatusOr<LabelledTable> read = ReadCsv(kDigits, {});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const LabelledTable& digits = read.value();
  EXPECT_EQ(digits.num_rows(), 1797);
  EXPECT_EQ(digits.num_features(), 64);
  EXPECT_EQ(digits.feature_names.front(), "pixel_0");
  EXPECT_EQ(digits.feature_names.back(), "pixel_63");
  EXPECT_EQ(digits.num_classes(), 10);
  EXPECT_TRUE(digits.class_names.empty());
  // The first image of the UCI set: a zero.
  EXPECT_EQ(digits.labels[0], 0);
  const std::vector<float> first_row_start = {0, 0, 5, 13, 9, 1, 0, 0, 0, 0, 13, 15, 10, 15, 5, 0};
  for (size_t i = 0; i < first_row_start.size(); ++i) EXPECT_EQ(digits.row(0)[i], first_row_start[i]) << i;
  EXPECT_EQ(*std::min_element(digits.features.begin(), digits.features.end()), 0.0f);
  EXPECT_EQ(*std::max_element(digits.features.begin(), digits.features.end()), 16.0f);
  std::vector<int> per_class(10);
  for (int32_t label : digits.labels) ++per_class[static_cast<size_t>(label)];
  EXPECT_EQ(per_class[0], 178);
  EXPECT_EQ(per_class[8], 174);
}

TEST(CsvReaderTest, LabelColumnAnywhereAndChosenFeatures) {
  LabelledTable t = MustParse("a,label,b\n1,2,3\n4,5,6\n");
  EXPECT_EQ(t.feature_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t.features, (std::vector<float>{1, 3, 4, 6}));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{2, 5}));

  CsvOptions options;
  options.label_column = "y";
  options.feature_columns = {"c", "a"};
  t = MustParse("a,b,c,y\n1,2,3,0\n", options);
  EXPECT_EQ(t.feature_names, (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(t.feature_keys, (std::vector<FeatureKey>{{"c", 1}, {"a", 1}}));
  EXPECT_EQ(t.features, (std::vector<float>{3, 1}));
}

TEST(CsvReaderTest, ClassNamesGetIdsInSortedOrder) {
  LabelledTable t = MustParse("x,label\n1,versicolor\n2,setosa\n3,\"virginica\"\n4,setosa\n");
  EXPECT_EQ(t.class_names, (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{1, 0, 2, 0}));
  EXPECT_EQ(t.num_classes(), 3);
}

TEST(CsvReaderTest, QuotesCrlfBlankLinesSpacesAndByteOrderMark) {
  LabelledTable t = MustParse("\xEF\xBB\xBF\"x 1\", \"label\"\r\n\r\n 1.5e1 , \"a \"\"b\"\"\"\r\n+2,c\r\n\n");
  EXPECT_EQ(t.feature_names, (std::vector<std::string>{"x 1"}));
  EXPECT_EQ(t.features, (std::vector<float>{15.0f, 2.0f}));
  EXPECT_EQ(t.class_names, (std::vector<std::string>{"a \"b\"", "c"}));
}

TEST(CsvReaderTest, ErrorsNameFileLineColumnAndText) {
  EXPECT_EQ(CsvErrorOf("a,label\n1,0\n2\n"), "t.csv:3: 1 fields, but the header has 2");
  EXPECT_EQ(CsvErrorOf("a,label\n1,0\n1,2,3\n"), "t.csv:3: 3 fields, but the header has 2");
  EXPECT_EQ(CsvErrorOf("a,label\n1,0\n\nx7,1\n"), "t.csv:4: column 'a': 'x7' is not a finite number");
  EXPECT_EQ(CsvErrorOf("a,label\nnan,0\n"), "t.csv:2: column 'a': 'nan' is not a finite number");
  EXPECT_EQ(CsvErrorOf("a,label\n,0\n"), "t.csv:2: column 'a': '' is not a finite number");
  EXPECT_EQ(CsvErrorOf("a,label\n1,3\n2,-1\n"),
            "t.csv:3: column 'label': label -1 is out of range (class ids are 0 to 2147483647)");
  EXPECT_EQ(CsvErrorOf("a,label\n1,cat\n2,\n"), "t.csv:3: column 'label': the label is empty");
  EXPECT_EQ(CsvErrorOf("a,b\n1,2\n"),
            "t.csv:1: no label column 'label' (the header names 2 columns, first 'a', last 'b')");
  EXPECT_EQ(CsvErrorOf("a,a,label\n"), "t.csv:1: column 'a' appears twice");
  EXPECT_EQ(CsvErrorOf("a,,label\n"), "t.csv:1: column 2 has no name");
  EXPECT_EQ(CsvErrorOf("label\n1\n"), "t.csv:1: no feature columns besides the label");
  EXPECT_EQ(CsvErrorOf("a,label\n\"1,0\n"), "t.csv:2: a quoted field is not closed");
  EXPECT_EQ(CsvErrorOf("a,label\n\"1\"x,0\n"), "t.csv:2: text after the closing quote of field 1");
  EXPECT_EQ(CsvErrorOf(""), "t.csv: the file is empty (no header row)");
  EXPECT_EQ(CsvErrorOf("a,label\n\n"), "t.csv: no rows after the header");
  CsvOptions options;
  options.feature_columns = {"a", "z"};
  EXPECT_EQ(CsvErrorOf("a,label\n1,0\n", options), "t.csv:1: no feature column 'z'");
  options.feature_columns = {"label"};
  EXPECT_EQ(CsvErrorOf("a,label\n1,0\n", options), "t.csv:1: column 'label' is the label, not a feature");
}

TEST(CsvReaderTest, MissingFileAndDirectoryAreNamed) {
  StatusOr<LabelledTable> missing = ReadCsv("/nonexistent/data.csv", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'/nonexistent/data.csv'"), std::string::npos);

  StatusOr<LabelledTable> dir = ReadCsv(std::filesystem::temp_directory_path().string(), {});
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos) << dir.status().message();
}

}  // namespace
}  // namespace lockstep::training
