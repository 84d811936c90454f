#include "banyan/core/latency_matrix.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "banyan/core/tree_builders.hpp"

using namespace banyan;

namespace {

/// The parse error's message; fails the test when parsing succeeded.
template <class T>
std::string error_of(const expected<T>& r) {
  BOOST_TEST_REQUIRE(!r.has_value());
  BOOST_TEST(to_string(r.err().code) == to_string(errc::parse_error));
  return r.err().message;
}

std::filesystem::path examples() {
  return std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "docs" / "examples";
}

} // namespace

BOOST_AUTO_TEST_SUITE(matrix_csv)

BOOST_AUTO_TEST_CASE(plain_numbers) {
  auto m = parse_matrix_csv("0,1.5,2\n3,0,4e1\n5,6,0\n");
  BOOST_TEST_REQUIRE(m.has_value());
  BOOST_TEST(m->names.empty());
  std::vector<std::vector<double>> want{{0, 1.5, 2}, {3, 0, 40}, {5, 6, 0}};
  BOOST_TEST(m->values == want);
}

BOOST_AUTO_TEST_CASE(header_of_names) {
  auto m = parse_matrix_csv("A, B\n0, 7\n9, 0\n");
  BOOST_TEST_REQUIRE(m.has_value());
  BOOST_TEST(m->names == (std::vector<std::string>{"A", "B"}));
  BOOST_TEST(m->values[0][1] == 7.0);
  BOOST_TEST(m->values[1][0] == 9.0);
}

BOOST_AUTO_TEST_CASE(name_column_with_and_without_corner) {
  for (const char* text : {",A,B\nA,0,7\nB,9,0\n", "from,A,B\nA,0,7\nB,9,0\n", "A,B\nA,0,7\nB,9,0\n"}) {
    auto m = parse_matrix_csv(text);
    BOOST_TEST_REQUIRE(m.has_value(), text << ": " << (m ? "" : m.err().message));
    BOOST_TEST(m->names == (std::vector<std::string>{"A", "B"}));
    BOOST_TEST(m->values == (std::vector<std::vector<double>>{{0, 7}, {9, 0}}));
  }
}

BOOST_AUTO_TEST_CASE(comments_blank_lines_spaces_and_crlf) {
  auto m = parse_matrix_csv("# latency in ms\r\n\r\n  A ,\tB  \r\n# row A\r\n 0 , 1 \r\n\r\n1,0\r\n");
  BOOST_TEST_REQUIRE(m.has_value(), (m ? "" : m.err().message));
  BOOST_TEST(m->names == (std::vector<std::string>{"A", "B"}));
  BOOST_TEST(m->values == (std::vector<std::vector<double>>{{0, 1}, {1, 0}}));
}

BOOST_AUTO_TEST_CASE(a_row_too_short) {
  BOOST_TEST(error_of(parse_matrix_csv("0,1,2\n1,0,2\n1,2\n")) == "line 3: expected 3 values, found 2");
  // Line numbers count comments and blank lines; the name column is not a value.
  BOOST_TEST(error_of(parse_matrix_csv("# c\n,A,B,C\n\nA,0,1,2\nB,1,0\nC,1,2,0\n")) ==
             "line 5: expected 3 values, found 2");
  BOOST_TEST(error_of(parse_matrix_csv("0,1\n1,0,5\n")) == "line 2: expected 2 values, found 3");
}

BOOST_AUTO_TEST_CASE(bad_cells) {
  BOOST_TEST(error_of(parse_matrix_csv("0,1\nx,0\n")) == "line 2, column 1: 'x' is not a number");
  BOOST_TEST(error_of(parse_matrix_csv("0,1ms\n1,0\n")) == "line 1, column 2: '1ms' is not a number");
  BOOST_TEST(error_of(parse_matrix_csv("A,B\nA,0,-2\nB,1,0\n")) == "line 2, column 3: negative value -2");
  BOOST_TEST(error_of(parse_matrix_csv("0,inf\n1,0\n")) == "line 1, column 2: 'inf' is not a finite number");
  BOOST_TEST(error_of(parse_matrix_csv("0,\n1,0\n")) == "line 1, column 2: empty cell");
}

BOOST_AUTO_TEST_CASE(not_square) {
  BOOST_TEST(error_of(parse_matrix_csv("0,1,2\n1,0,2\n")) ==
             "3 columns but 2 rows (the matrix must be square)");
  BOOST_TEST(error_of(parse_matrix_csv("0,1\n1,0\n2,2\n")) ==
             "line 3: more rows than the 2 columns (the matrix must be square)");
  BOOST_TEST(error_of(parse_matrix_csv("A,B,C\n0,1,2\n")) ==
             "3 columns but 1 rows (the matrix must be square)");
}

BOOST_AUTO_TEST_CASE(bad_headers_and_names) {
  BOOST_TEST(error_of(parse_matrix_csv("")) == "no data (an N x N matrix is expected)");
  BOOST_TEST(error_of(parse_matrix_csv("# only a comment\n\n")) == "no data (an N x N matrix is expected)");
  BOOST_TEST(error_of(parse_matrix_csv("A,B\n")) == "line 1: a header but no rows");
  BOOST_TEST(error_of(parse_matrix_csv("A,A\n0,1\n1,0\n")) == "line 1, column 2: duplicate name 'A'");
  BOOST_TEST(error_of(parse_matrix_csv(",A,B\nA,0,1\nC,1,0\n")) ==
             "line 3, column 1: row 'C' where column 2 is 'B' (rows and columns must list "
             "processors in the same order)");
}

BOOST_AUTO_TEST_CASE(load_reports_the_path) {
  auto missing = load_matrix_csv("/nonexistent/banyan/m.csv");
  BOOST_TEST_REQUIRE(!missing.has_value());
  BOOST_TEST(to_string(missing.err().code) == to_string(errc::not_found));
  auto path = std::filesystem::temp_directory_path() / "banyan_latency_matrix_test.csv";
  {
    std::ofstream out(path);
    out << "0,1\n1\n";
  }
  auto bad = load_matrix_csv(path.string());
  std::filesystem::remove(path);
  BOOST_TEST(error_of(bad) == path.string() + ": line 2: expected 2 values, found 1");
}

BOOST_AUTO_TEST_CASE(shipped_examples_parse) {
  auto hlot = load_matrix_csv((examples() / "hlot-8site.csv").string());
  BOOST_TEST_REQUIRE(hlot.has_value(), (hlot ? "" : hlot.err().message));
  BOOST_TEST(hlot->names.size() == 8u);
  BOOST_TEST(hlot->names.front() == "A");
  BOOST_TEST(completion_time(hlot_tree(hlot->values, 0), hlot->values) == 600.0);

  auto three = load_matrix_csv((examples() / "three-clusters.csv").string());
  BOOST_TEST_REQUIRE(three.has_value(), (three ? "" : three.err().message));
  auto bw = load_matrix_csv((examples() / "three-clusters-bw.csv").string());
  BOOST_TEST_REQUIRE(bw.has_value(), (bw ? "" : bw.err().message));
  BOOST_TEST(bw->names == three->names);
  auto groups = load_clusters((examples() / "three-clusters.clusters").string(), 12, three->names);
  BOOST_TEST_REQUIRE(groups.has_value(), (groups ? "" : groups.err().message));
  BOOST_TEST((*groups)[5] == (std::vector<int>{1, 0})); // tokyo1: cluster tokyo, machine m0
  // The file's clusters agree with the 1 ms threshold.
  auto derived = clusters_by_threshold(three->values);
  for (proc_id p = 0; p < 12; ++p)
    BOOST_TEST((*groups)[p][0] == derived[p]);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(clusters_file)

BOOST_AUTO_TEST_CASE(ids_and_names_one_or_more_levels) {
  auto g = parse_clusters("# p site machine\n2 tokyo m0\n0, osaka, m0\n1 osaka m1\n3 tokyo m0\n", 4);
  BOOST_TEST_REQUIRE(g.has_value(), (g ? "" : g.err().message));
  // Each level numbered in order of first appearance in the file.
  std::vector<std::vector<int>> want{{1, 0}, {1, 1}, {0, 0}, {0, 0}};
  BOOST_TEST(*g == want);
  // Processors by matrix name; group "1" appears first, so it is numbered 0.
  auto named = parse_clusters("b 1\na 0\n", 2, {"a", "b"});
  BOOST_TEST_REQUIRE(named.has_value());
  BOOST_TEST(*named == (std::vector<std::vector<int>>{{1}, {0}}));
}

BOOST_AUTO_TEST_CASE(errors) {
  BOOST_TEST(error_of(parse_clusters("0 a\n1 a\n9 b\n", 3)) == "line 3: processor 9 out of range (3 processors)");
  BOOST_TEST(error_of(parse_clusters("0 a\n1 a\n0 b\n", 3)) == "line 3: processor 0 listed twice (first on line 1)");
  BOOST_TEST(error_of(parse_clusters("0 a\n2 a\n", 3)) == "processor 1 is not listed");
  BOOST_TEST(error_of(parse_clusters("x a\ny a\n", 2, {"x", "z"})) == "line 2: unknown processor 'y'");
  BOOST_TEST(error_of(parse_clusters("0 a m\n1 a\n", 2)) == "line 2: expected 2 groups, found 1");
  BOOST_TEST(error_of(parse_clusters("0\n", 1)) == "line 1: no group for processor 0");
  BOOST_TEST(error_of(parse_clusters("1.5 a\n", 2)) == "line 1: unknown processor '1.5'");
}

BOOST_AUTO_TEST_CASE(threshold_clusters) {
  // 0-1 and 1-2 are close (single linkage joins 0, 1, 2); 3-4 close one way only.
  std::vector<std::vector<double>> lat{
    {0, 0.5, 5, 9, 9},
    {0.5, 0, 0.8, 9, 9},
    {5, 0.8, 0, 9, 9},
    {9, 9, 9, 0, 0.2},
    {9, 9, 9, 1.5, 0},
  };
  BOOST_TEST(clusters_by_threshold(lat) == (std::vector<int>{0, 0, 0, 1, 2}));
  BOOST_TEST(clusters_by_threshold(lat, 2.0) == (std::vector<int>{0, 0, 0, 1, 1}));
  BOOST_TEST(clusters_by_threshold(lat, 0.1) == (std::vector<int>{0, 1, 2, 3, 4}));
}

BOOST_AUTO_TEST_SUITE_END()
