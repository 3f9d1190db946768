// The selection rule of a selected output (engines/row-select.h): which queries' rows a reply carries.
#include "engines/row-select.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using rfdetr::row_select;
using rfdetr::select_rows;
using rows_t = std::vector<uint32_t>;

constexpr float k_nan = std::numeric_limits<float>::quiet_NaN();

// The logit whose exact sigmoid is p.
float logit_of(double p) {
    return static_cast<float>(std::log(p / (1.0 - p)));
}

row_select rule(double threshold, uint64_t max) {
    row_select s;
    s.threshold = threshold;
    s.max       = max;
    return s;
}

TEST(row_select, keeps_queries_above_the_threshold_by_logit_descending) {
    // 4 queries x 2 classes; each row's best logit decides.
    const std::vector<float> l = {0.0f, 2.0f,    // q0: label 1, 2.0
                                  -3.0f, -4.0f,  // q1: label 0, -3 (sigmoid 0.047)
                                  3.0f, 1.0f,    // q2: label 0, 3.0
                                  1.0f, 1.5f};   // q3: label 1, 1.5
    EXPECT_EQ(select_rows(l.data(), 4, 2, rule(0.5, 10)), (rows_t{2, 0, 3}));
    EXPECT_EQ(select_rows(l.data(), 4, 2, rule(0.0, 10)), (rows_t{2, 0, 3, 1}));
    EXPECT_EQ(select_rows(l.data(), 4, 2, rule(0.5, 2)), (rows_t{2, 0}));
    EXPECT_EQ(select_rows(l.data(), 4, 2, rule(0.0, 0)), rows_t{}) << "max 0 selects nothing";
    EXPECT_EQ(select_rows(l.data(), 4, 2, rule(1.0, 10)), rows_t{});
}

TEST(row_select, equal_logits_order_by_query_and_the_first_max_of_a_row_is_its_label) {
    const std::vector<float> l = {1.0f, 1.0f,   // q0: a tie between classes: label 0
                                  2.0f, 0.0f,   // q1
                                  0.5f, 2.0f,   // q2: same logit as q1
                                  1.0f, 0.0f};  // q3: same as q0
    EXPECT_EQ(select_rows(l.data(), 4, 2, rule(0.5, 10)), (rows_t{1, 2, 0, 3}));
    row_select only1 = rule(0.5, 10);
    only1.has_classes = true;
    only1.classes     = {1};
    EXPECT_EQ(select_rows(l.data(), 4, 2, only1), (rows_t{2})) << "q0's label is 0 (first max), not 1";
}

TEST(row_select, nan_never_wins_and_an_all_nan_row_is_skipped) {
    const std::vector<float> l = {k_nan, 1.0f, 0.5f,    // q0: label 1
                                  k_nan, k_nan, k_nan,  // q1: skipped
                                  2.0f, k_nan, 3.0f};   // q2: label 2, 3.0
    EXPECT_EQ(select_rows(l.data(), 3, 3, rule(0.0, 10)), (rows_t{2, 0}));
    row_select c2 = rule(0.0, 10);
    c2.has_classes = true;
    c2.classes     = {2};
    EXPECT_EQ(select_rows(l.data(), 3, 3, c2), (rows_t{2}));
}

TEST(row_select, classes_filter_by_label_and_an_empty_list_keeps_nothing) {
    const std::vector<float> l = {3.0f, 0.0f, 0.0f,   // label 0
                                  0.0f, 3.0f, 0.0f,   // label 1
                                  0.0f, 0.0f, 4.0f};  // label 2
    row_select s = rule(0.5, 10);
    s.has_classes = true;
    s.classes     = {2, 0};
    EXPECT_EQ(select_rows(l.data(), 3, 3, s), (rows_t{2, 0}));
    s.classes = {};
    EXPECT_EQ(select_rows(l.data(), 3, 3, s), rows_t{});
    s.has_classes = false;
    EXPECT_EQ(select_rows(l.data(), 3, 3, s), (rows_t{2, 0, 1}));
}

TEST(row_select, a_class_threshold_replaces_the_threshold_for_its_label_only) {
    const std::vector<float> l = {logit_of(0.6), 0.0f,  // label 0 at 0.6
                                  -9.0f, logit_of(0.6),  // label 1 at 0.6
                                  logit_of(0.3), -9.0f}; // label 0 at 0.3
    row_select s = rule(0.5, 10);
    s.class_thresholds = {{1, 0.7}};
    EXPECT_EQ(select_rows(l.data(), 3, 2, s), (rows_t{0}));
    s.class_thresholds = {{0, 0.2}};
    EXPECT_EQ(select_rows(l.data(), 3, 2, s), (rows_t{0, 1, 2}));
}

TEST(row_select, a_score_within_2_pow_minus_20_below_the_threshold_is_kept_for_the_client_to_judge) {
    // The client compares its f32 sigmoid with f32(threshold): either may round up across it.
    const double thr = 0.3;
    const std::vector<float> l = {logit_of(thr - 0.5e-6), -9.0f,  // 2^-20 = 9.5e-7: inside the margin
                                  logit_of(thr - 4e-6), -9.0f};   // outside it
    EXPECT_EQ(select_rows(l.data(), 2, 2, rule(thr, 10)), (rows_t{0}));
}

TEST(row_select, near_ties_with_the_last_kept_score_are_all_taken) {
    // max = 2: q1 and q0 first; q2's score is 2^-22 below q0's (the client's f32 sigmoid may order them either
    // way), q3's well below.
    const double p = 0.7;
    const std::vector<float> l = {logit_of(p), logit_of(0.9), logit_of(p - 0.25e-6), logit_of(p - 1e-4)};
    ASSERT_LT(l[2], l[0]);
    EXPECT_EQ(select_rows(l.data(), 4, 1, rule(0.5, 2)), (rows_t{1, 0, 2}));
    EXPECT_EQ(select_rows(l.data(), 4, 1, rule(0.5, 1)), (rows_t{1}));
}

TEST(row_select, saturated_scores_are_all_taken_since_the_client_orders_them_by_query) {
    // Logits 20..30 all give an f32 sigmoid of 1.0: the client keeps the lowest query indices among them, not
    // the largest logits.
    std::vector<float> l;
    for (int q = 0; q < 10; q++) {
        l.push_back(20.0f + static_cast<float>(q));
    }
    l.push_back(1.0f);  // q10: 0.73, not a near-tie
    const rows_t got = select_rows(l.data(), 11, 1, rule(0.5, 3));
    EXPECT_EQ(got, (rows_t{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
}

}  // namespace
