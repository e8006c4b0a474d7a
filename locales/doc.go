// Package locales holds the console's message catalogs: en/ and fr/
// messages.gotext.json, which people edit, and catalog.go, which
// tools/gen-locales generates from them and from the message literals of
// package console (gotext extract → merge → generate). Importing the package
// registers the catalog as message.DefaultCatalog.
//
// To add or change a message: write it as a literal at its call site in
// package console (T(ctx, "Attempts")), run tools/gen-locales, fill the
// new empty "translation" in fr/messages.gotext.json (plurals use a
// "select" on the "plural" feature, as existing entries show), and run the
// script again. The console's tests fail on any message without a French
// translation.
package locales
