// Package spend is Corral's money: prices, the cost of an upstream answer,
// what a cached answer saved, and (later in this package) budgets.
//
// Money is integer minor units, never floats (Stripe's convention): a
// [Nanodollars] is 10⁻⁹ USD in an int64, prices are whole nano-dollars per
// token, and a cost is a sum of products of integers, so adding a million
// costs in any order gives the same total as pricing their summed usage.
// A float64 would drift by a cent in a month of chargeback rows and make
// "spent ≤ budget" depend on the order of additions.
//
// Why nano-dollars: the cheapest list prices are fractions of a cent per
// thousand tokens (text-embedding-3-small: $0.02 per million tokens, 20
// nano-dollars a token; gpt-5-nano's cached input $0.005, 5), so micro-
// dollars could not price one token; an int64 of nano-dollars still holds
// $9.2 billion.
//
// The package has no HTTP and no Redis client in it: the server asks it for
// costs and renders what it says.
package spend
