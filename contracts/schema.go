package contracts

// SchemaDialect is the JSON Schema dialect of the documents JSONSchema
// produces.
const SchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// JSONSchema returns a JSON Schema 2020-12 document equivalent to the
// contract. Every object level forbids additional properties, each field
// carries its description and an "x-classification" annotation holding its
// effective classification, and the bytes are deterministic so the document
// can be served and cached by digest.
func (c Contract) JSONSchema() []byte {
	b := make([]byte, 0, 1024)
	b = append(b, `{"$schema":`...)
	b = appendString(b, SchemaDialect)
	b = append(b, ',')
	b = appendObjectSchemaBody(b, c.Fields, ClassNormal)
	return append(b, '}')
}

// appendObjectSchemaBody writes type, properties, required and
// additionalProperties, without braces.
func appendObjectSchemaBody(b []byte, fs []Field, class Classification) []byte {
	b = append(b, `"type":"object","properties":{`...)
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, f.Name)
		b = append(b, ':')
		b = appendFieldSchema(b, f, class)
	}
	b = append(b, '}')
	n := 0
	for _, f := range fs {
		if !f.Required {
			continue
		}
		if n == 0 {
			b = append(b, `,"required":[`...)
		} else {
			b = append(b, ',')
		}
		b = appendString(b, f.Name)
		n++
	}
	if n > 0 {
		b = append(b, ']')
	}
	return append(b, `,"additionalProperties":false`...)
}

func appendFieldSchema(b []byte, f Field, parent Classification) []byte {
	class := MaxClass(parent, f.Classification)
	b = append(b, '{')
	switch f.Type {
	case TypeText:
		b = append(b, `"type":"string"`...)
		b = appendCount(b, "minLength", f.MinLength)
		b = appendCount(b, "maxLength", f.MaxLength)
		switch {
		case f.Pattern != "":
			b = append(b, `,"pattern":`...)
			b = appendString(b, f.Pattern)
		case f.Format == FormatEmail:
			// What the format leaves to Relais (see trimmedEmail), said
			// to validators that read the served schema.
			b = append(b, `,"pattern":`...)
			b = appendString(b, trimmedPattern)
		}
		if f.Format != "" {
			b = append(b, `,"format":`...)
			b = appendString(b, f.Format)
		}
	case TypeInteger, TypeNumber:
		b = append(b, `"type":`...)
		b = appendString(b, string(f.Type))
		b = appendNumberOpt(b, "minimum", f.Minimum)
		b = appendNumberOpt(b, "maximum", f.Maximum)
	case TypeBoolean:
		b = append(b, `"type":"boolean"`...)
	case TypeDate:
		b = append(b, `"type":"string","format":"date"`...)
	case TypeDatetime:
		b = append(b, `"type":"string","format":"date-time","pattern":`...)
		b = appendString(b, dateTimePattern)
	case TypeChoice:
		b = append(b, `"type":"string","enum":[`...)
		for i, v := range f.Values {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, v)
		}
		b = append(b, ']')
	case TypeObject:
		b = appendObjectSchemaBody(b, f.Fields, class)
	case TypeList:
		b = append(b, `"type":"array"`...)
		if f.Items != nil {
			b = append(b, `,"items":`...)
			b = appendFieldSchema(b, *f.Items, class)
		}
		b = appendCount(b, "minItems", f.MinItems)
		b = appendCount(b, "maxItems", f.MaxItems)
	default:
		// An unknown type accepts nothing rather than everything.
		b = append(b, `"not":{}`...)
	}
	if f.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, f.Description)
	}
	b = append(b, `,"x-classification":`...)
	b = appendString(b, string(class))
	return append(b, '}')
}
