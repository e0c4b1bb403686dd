/*
 * note.c — the image's short name, from its name note.
 *
 * The coprocessor ABI (docs/coprocessor-abi.md) carries an image's short
 * name the way the SPU's .note.spu_name did: a note with owner "COPNAME",
 * type 1, whose descriptor is the name, NUL-terminated, 1 to 63 characters
 * of [A-Za-z0-9_.-].  The SDK puts it in a PT_NOTE segment and an SHT_NOTE
 * section.
 *
 * How it works
 * ------------
 * The PT_NOTE segments are read first (a stripped image keeps them), then
 * the SHT_NOTE sections; libelf walks the notes (gelf_getnote), checking
 * every header, name and descriptor against the data it came from.  The
 * first COPNAME note decides: a well-formed one gives the name, a malformed
 * one fails the image.  An image without one simply has no short name.
 */
#include "overlay/overlay-internal.h"

#include <elf.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int name_character(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

/* Is a COPNAME descriptor a NUL-terminated name of valid characters? */
static int valid_name(const char *desc, size_t size)
{
    size_t length = strnlen(desc, size);

    if (length == size || length == 0 || length > COP_NAME_MAX)
        return 0;
    for (size_t i = 0; i < length; i++)
        if (!name_character(desc[i]))
            return 0;
    return 1;
}

/*
 * Looks through the notes of data for the name note.  Returns 1 when found
 * (the name taken), 0 when absent, -1 when malformed.
 */
static int scan_notes(struct ovl_image *image, Elf_Data *data,
                      struct ovl_error *error)
{
    static const char owner[] = COP_NOTE_OWNER;
    size_t offset = 0, name_offset, desc_offset, next;
    GElf_Nhdr note;

    while (offset < data->d_size &&
           (next = gelf_getnote(data, offset, &note, &name_offset,
                                &desc_offset)) > 0) {
        const char *bytes = data->d_buf;
        offset = next;
        if (note.n_namesz != sizeof owner || note.n_type != NT_COP_NAME ||
            memcmp(bytes + name_offset, owner, sizeof owner) != 0)
            continue;
        if (!valid_name(bytes + desc_offset, note.n_descsz)) {
            ovl_fail(error, image->label, "the %s note does not hold a name "
                     "of 1 to %u characters [A-Za-z0-9_.-]", COP_NOTE_OWNER,
                     COP_NAME_MAX);
            return -1;
        }
        image->short_name = strdup(bytes + desc_offset);
        if (image->short_name == NULL) {
            ovl_fail(error, image->label, "out of memory");
            return -1;
        }
        return 1;
    }
    return 0;
}

static int scan_note_segments(struct ovl_image *image,
                              struct ovl_error *error)
{
    const Elf32_Phdr *phdrs = elf32_getphdr(image->elf);
    size_t count;

    if (phdrs == NULL || elf_getphdrnum(image->elf, &count) != 0)
        return 0;
    for (size_t i = 0; i < count; i++) {
        if (phdrs[i].p_type != PT_NOTE || phdrs[i].p_filesz == 0)
            continue;
        Elf_Data *data = elf_getdata_rawchunk(
            image->elf, phdrs[i].p_offset, phdrs[i].p_filesz,
            phdrs[i].p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
        if (data == NULL)
            return ovl_fail(error, image->label, "cannot read note segment "
                            "%zu: %s", i, elf_errmsg(-1));
        int found = scan_notes(image, data, error);
        if (found != 0)
            return found;
    }
    return 0;
}

static int scan_note_sections(struct ovl_image *image,
                              struct ovl_error *error)
{
    Elf_Scn *scn = NULL;

    while ((scn = elf_nextscn(image->elf, scn)) != NULL) {
        const Elf32_Shdr *shdr = elf32_getshdr(scn);
        if (shdr == NULL || shdr->sh_type != SHT_NOTE || shdr->sh_size == 0)
            continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        if (data == NULL)
            return ovl_fail(error, image->label, "cannot read note section "
                            "%zu: %s", elf_ndxscn(scn), elf_errmsg(-1));
        int found = scan_notes(image, data, error);
        if (found != 0)
            return found;
    }
    return 0;
}

int ovl_load_name_note(struct ovl_image *image, struct ovl_error *error)
{
    int found = scan_note_segments(image, error);

    if (found == 0)
        found = scan_note_sections(image, error);
    return found < 0 ? -1 : 0;
}
